// Package jobs implements the tool contract's answer for work that can
// outlast a binding's timeout_seconds: a start tool that returns a job ID at
// once, a status tool that tells the job's state and, once it has ended, its
// result, and a cancel tool that stops it.
//
// Job IDs carry 128 random bits from crypto/rand, so they cannot be guessed,
// and every job belongs to the Owner that started it: the tenant and the
// session of the call, as the contract's "Authorize with tenant_id and
// session_id" asks. A status or cancel call from another session (of the
// same tenant or another) gets ErrNotFound, the same answer as for an ID
// that never existed, so IDs of other sessions cannot even be confirmed.
// The one deliberate exception is an Owner made with HandleOwner, for
// clients that have no session (see there).
//
// Manager runs jobs as goroutines in memory, so its jobs end with the
// process. Its job IDs also name the Manager that issued them (see NewID
// for the shape), so that after a restart a status or cancel call for a job
// of the earlier process gets ErrOtherInstance — the job ended with that
// process and its outcome is unknown — rather than ErrNotFound, which would
// read as "ended long ago and forgotten". Nothing is persisted for this. A
// service whose jobs must survive a restart (the approvals of the local
// service) keeps them in its own store and implements Backend; Tools builds
// the status and cancel tools over either.
//
// Source: the contract's "Handle errors, timeouts, and long jobs" section
// (shared/seeds/000_*.txt) and the ToolCall lifecycle of the peer platform
// (shared/seeds/001_*.txt).
package jobs

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/brain-tools/suite/pkg/service"
	"github.com/brain-tools/suite/pkg/tool"
)

// State is a job's place in its lifecycle. A job starts running and ends in
// exactly one of the three final states, which never change again.
type State string

// The states of a job.
const (
	// Running: started and not yet ended.
	Running State = "running"
	// Succeeded: ended with a result whose is_error is false.
	Succeeded State = "succeeded"
	// Failed: ended with a result whose is_error is true.
	Failed State = "failed"
	// Cancelled: stopped by a cancel call or by its owner shutting down.
	Cancelled State = "cancelled"
)

// Final reports whether s is one of the ending states.
func (s State) Final() bool { return s == Succeeded || s == Failed || s == Cancelled }

// Status is a job as the status and cancel tools report it. Result is nil
// while the job runs and set once it has ended (also for a cancelled job,
// whose result says so). FinishedAt is the zero time while it runs.
type Status struct {
	ID         string
	State      State
	CreatedAt  time.Time
	FinishedAt time.Time
	Result     *tool.Result
	// Progress is the latest progress the job reported (Report), as JSON;
	// nil when it reported none.
	Progress json.RawMessage
	// Partial is the output so far the job reported (ReportPartial) while
	// it runs; nil when it reported none.
	Partial *tool.Result
}

// ErrNotFound is the answer for a job ID that does not exist, has been
// forgotten after its retention, or belongs to another Owner (another
// session or tenant). The three cases are deliberately indistinguishable.
// (For a well-formed ID it did not issue, a Manager answers
// ErrOtherInstance instead.)
var ErrNotFound = errors.New("job not found")

// ErrTooManyJobs is returned by Manager.Start when the Owner already has
// the most running jobs its Manager allows.
var ErrTooManyJobs = errors.New("too many running jobs for this session")

// Owner is who a job belongs to: the tool call's tenant_id and session_id
// (the contract's "Authorize with tenant_id and session_id"). Owners are
// compared field by field, so no two distinct (tenant, session) pairs are
// ever one owner, whatever bytes the IDs hold.
//
// Handle is set instead of Session only by HandleOwner: see there.
type Owner struct {
	Tenant  string
	Session string
	Handle  string
}

// CallOwner is the Owner of a job that call starts or asks about: its
// tenant and session.
func CallOwner(call *service.Call) Owner {
	return Owner{Tenant: call.TenantID, Session: call.SessionID}
}

// HandleOwner is the one deliberate exception to "a job belongs to its
// session": the owner of jobs started under handle, an unguessable
// capability a service issued to tenant for a client that has no session
// of its own (an MCP client on the stateless 2026-07-28 revision, where
// every request is a session of its own, passes the handle back in its
// arguments). Every call of tenant that presents the handle is this owner,
// whichever session or request it comes from; a call of another tenant
// with the same handle is not. The service that issues handles makes them
// unguessable (NewID) and tied to the tenant.
func HandleOwner(tenant, handle string) Owner { return Owner{Tenant: tenant, Handle: handle} }

// check reports an Owner that names no one.
func (o Owner) check() error {
	switch {
	case o.Tenant == "":
		return errors.New("tenant is empty")
	case o.Session == "" && o.Handle == "":
		return errors.New("session is empty")
	case o.Session != "" && o.Handle != "":
		return errors.New("owner has both a session and a handle")
	}
	return nil
}

// Backend is what the status and cancel tools need from a job store. Every
// lookup is scoped to the Owner: an ID of another session or tenant is
// ErrNotFound.
type Backend interface {
	// Status returns the job's state. With wait > 0 it first waits up to
	// wait for a running job to end (returning early when ctx ends, which
	// is not an error: the state at that moment is returned).
	Status(ctx context.Context, owner Owner, id string, wait time.Duration) (Status, error)
	// Cancel stops a running job and returns its state afterwards. Cancelling
	// a job that has already ended changes nothing and is not an error.
	Cancel(ctx context.Context, owner Owner, id string) (Status, error)
}

// ErrOtherInstance is what errors.Is finds in a Manager's answer for a
// well-formed job ID that the Manager did not issue; the error is an
// *InstanceError.
var ErrOtherInstance = errors.New("job was not started by this instance of the service")

// InstanceError is a Manager's Status and Cancel answer for a well-formed
// job ID that it did not issue: one whose run tag is another Manager's, or
// an untagged ID (NewID's shape, which job IDs had before they were
// tagged). In a service that runs one process at a time such an ID comes
// from before the service last restarted: the job, if it existed, ended
// with that process — a running one was stopped with it — and its outcome
// is unknown here. The answer is the same for every owner, as the ID's
// tag is all it is based on: it confirms nothing about the job.
type InstanceError struct {
	// ID is the job ID asked about.
	ID string
	// IssuerStart is the start of the Manager that issued ID, read from the
	// ID's run tag (millisecond precision); zero for an untagged ID.
	IssuerStart time.Time
	// Start is the start of the Manager that answers.
	Start time.Time
}

// Restarted reports whether ID comes from before this Manager started: an
// untagged ID, or a tag naming an earlier start. It is false only for a tag
// naming this Manager's start or a later one — another process running
// now, a clock set back between two runs, or a made-up ID.
func (e *InstanceError) Restarted() bool {
	return e.IssuerStart.IsZero() || e.IssuerStart.Before(e.Start)
}

func (e *InstanceError) Error() string {
	if e.IssuerStart.IsZero() {
		return fmt.Sprintf("job %s: no run tag, so not started by this instance of the service (started %s)", e.ID, stamp(e.Start))
	}
	return fmt.Sprintf("job %s: started by the instance of the service that started %s, not by this one (started %s)", e.ID, stamp(e.IssuerStart), stamp(e.Start))
}

// Is makes errors.Is(err, ErrOtherInstance) true.
func (e *InstanceError) Is(target error) bool { return target == ErrOtherInstance }

// Explain tells the caller of a status or cancel tool what became of the
// job, for an is_error answer with unknown_outcome: which run of the
// service started it, that the service keeps no jobs across a restart, then
// ifRunning (what became of the job if it was still running at the
// restart: "it was stopped with the service" for a Manager's own jobs),
// then that its outcome is unknown. noun names a job ("command"); service
// names the service ("the sandbox service").
func (e *InstanceError) Explain(noun, service, ifRunning string) string {
	const outcome = " Its outcome is unknown: whatever it did may have happened, and no result or output of it was kept."
	switch {
	case e.IssuerStart.IsZero():
		return fmt.Sprintf("%s %s was started before %s restarted at %s: its ID has no run tag, so this run did not issue it, and the service keeps no %ss across a restart. If it was still running then, %s.%s",
			noun, e.ID, service, stamp(e.Start), noun, ifRunning, outcome)
	case e.Restarted():
		return fmt.Sprintf("%s %s was started by an earlier run of %s (started %s); the service restarted at %s, after the %s started, and keeps no %ss across a restart. If it was still running then, %s.%s",
			noun, e.ID, service, stamp(e.IssuerStart), stamp(e.Start), noun, noun, ifRunning, outcome)
	default:
		return fmt.Sprintf("%s %s was started by another run of %s (started %s), not by this one (started %s), which cannot see or stop it.%s",
			noun, e.ID, service, stamp(e.IssuerStart), stamp(e.Start), outcome)
	}
}

// stamp writes t in UTC with milliseconds, the precision of a run tag.
func stamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z07:00") }

// IDBits is the number of random bits in an ID from NewID, and so in a
// Manager's job ID.
const IDBits = 128

// Shapes of IDs. A job ID is a token of 26 characters, optionally followed
// by "_" and a run tag of 9 characters; all of them a-z and 2-7.
const (
	// IDPattern is the JSON Schema pattern (and regexp) of what ValidID
	// accepts.
	IDPattern = "^[a-z2-7]{26}(_[a-z2-7]{9})?$"
	// IDShape describes IDPattern in words, for error messages.
	IDShape = "26 characters of a-z and 2-7, then optionally _ and 9 more"
)

const (
	tokenLen = 26 // base32 of IDBits
	tagLen   = 9  // base32 of tagBits
	tagBits  = 5 * tagLen
)

const idAlphabet = "abcdefghijklmnopqrstuvwxyz234567"

var idEncoding = base32.NewEncoding(idAlphabet).WithPadding(base32.NoPadding)

// NewID returns a new unguessable token: 128 bits from crypto/rand in
// lower-case base32 without padding (26 characters of a-z and 2-7), safe in
// URLs, file names and HTML without escaping. It is an ID by itself (the
// local service's approval IDs, which outlive the process) and the random
// part of a Manager's job IDs, which are
//
//	<token>_<tag>   e.g. "qlc2ckkmk5gh64ngwthcixlysq_bts3t2nms"
//
// 36 characters: the token, then "_" and the issuing Manager's run tag, its
// start as Unix milliseconds in 9 characters of the same base32 alphabet,
// most significant first (45 bits, up to the year 3084; the example's tag
// is 2026-03-04T05:06:07.890Z). The tag is not
// secret and adds no randomness: the 128 random bits alone make the ID
// unguessable. It tells a Manager whether it issued an ID (InstanceError).
// Managers of one process get distinct starts (a later one moves to the
// next millisecond if needed); two processes share a tag only if they
// started in the same millisecond.
func NewID() string {
	var b [IDBits / 8]byte
	// crypto/rand.Read never returns an error since Go 1.24; it crashes the
	// program instead of returning predictable bytes.
	_, _ = rand.Read(b[:])
	return idEncoding.EncodeToString(b[:])
}

// ValidID reports whether s has a shape NewID or a Manager produces
// (IDPattern): a token, or a token with a run tag. Callers use it to refuse
// malformed IDs early with a clear message; a well-formed ID that does not
// exist is still ErrNotFound (or, at a Manager, ErrOtherInstance).
func ValidID(s string) bool {
	token, tag, tagged := strings.Cut(s, "_")
	if len(token) != tokenLen {
		return false
	}
	if _, err := idEncoding.DecodeString(token); err != nil {
		return false
	}
	if !tagged {
		return true
	}
	_, ok := decodeTag(tag)
	return ok
}

// IssuerStart returns the start of the Manager that issued the job ID id,
// read from its run tag, and false for an ID without a tag or a malformed
// one.
func IssuerStart(id string) (time.Time, bool) {
	if !ValidID(id) {
		return time.Time{}, false
	}
	_, tag, tagged := strings.Cut(id, "_")
	if !tagged {
		return time.Time{}, false
	}
	ms, _ := decodeTag(tag)
	return time.UnixMilli(ms), true
}

// encodeTag writes ms (0 <= ms < 2^45) as a run tag.
func encodeTag(ms int64) string {
	var b [tagLen]byte
	for i := tagLen - 1; i >= 0; i-- {
		b[i] = idAlphabet[ms&31]
		ms >>= 5
	}
	return string(b[:])
}

func decodeTag(tag string) (int64, bool) {
	if len(tag) != tagLen {
		return 0, false
	}
	var ms int64
	for i := range len(tag) {
		v := strings.IndexByte(idAlphabet, tag[i])
		if v < 0 {
			return 0, false
		}
		ms = ms<<5 | int64(v)
	}
	return ms, true
}
