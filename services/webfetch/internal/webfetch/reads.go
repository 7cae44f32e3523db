package webfetch

import (
	"sync/atomic"
	"time"

	"github.com/hashicorp/golang-lru/v2/expirable"

	"github.com/brain-tools/suite/pkg/extract"
)

// page is one page as read: what a result reports and the extracted text.
type page struct {
	URL, FinalURL string
	Status        int
	Doc           *extract.Document
	// Scripts reports that the page has <script> elements, for the note
	// of a page without text.
	Scripts bool
	// Rendered reports that the text is of the page as a browser rendered
	// it.
	Rendered bool
	// Note is said beside the text of the first part (a render that
	// failed, a page still loading).
	Note string
}

// size is what a cached page costs, in bytes.
func (p *page) size() int64 { return int64(len(p.Doc.Text)+len(p.URL)+len(p.FinalURL)) + 256 }

// reads keeps the pages read recently, by URL and extraction options, for
// the cache TTL and within a byte budget, whatever the size of the body:
// the start_index calls that page through a long document then cost no
// download and no extraction, and join back to one version of the page
// even when the server changes it between calls.
type reads struct {
	lru   *expirable.LRU[string, *page]
	bytes atomic.Int64
	max   int64
}

// readEntries caps the pages kept, whatever their size.
const readEntries = 64

func newReads(ttl time.Duration, maxBytes int64) *reads {
	r := &reads{max: maxBytes}
	r.lru = expirable.NewLRU[string, *page](readEntries, func(_ string, p *page) { r.bytes.Add(-p.size()) }, ttl)
	return r
}

func (r *reads) get(key string) (*page, bool) { return r.lru.Get(key) }

// add keeps p unless it alone is over the budget, then drops the oldest
// pages until the budget holds.
func (r *reads) add(key string, p *page) {
	if p.size() > r.max {
		return
	}
	r.lru.Remove(key) // its size leaves the count through the eviction callback
	r.bytes.Add(p.size())
	r.lru.Add(key, p)
	for r.bytes.Load() > r.max {
		if _, _, ok := r.lru.RemoveOldest(); !ok {
			break
		}
	}
}
