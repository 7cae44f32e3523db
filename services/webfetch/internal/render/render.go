// Package render asks the browser service (services/browser, POST /render)
// for a page as Chromium renders it, scripts run, so that web_fetch can
// read pages that build their text with JavaScript. The browser fetches
// through its own SSRF guard (BROWSER_ALLOW, BROWSER_PORTS); web_fetch
// checks and fetches the URL through its own first.
package render

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/brain-tools/suite/pkg/tracing"
)

// MaxResponseBytes caps the browser's answer: the rendered DOM (at most
// BROWSER_MAX_HTML_BYTES, 10 MiB by default) as a JSON string.
const MaxResponseBytes = 32 << 20

// Page is the browser's answer.
type Page struct {
	URL      string   `json:"url"`
	FinalURL string   `json:"final_url"`
	Status   int      `json:"status"`
	Title    string   `json:"title"`
	HTML     string   `json:"html"`
	Loading  bool     `json:"loading,omitempty"`
	Cut      bool     `json:"cut,omitempty"`
	Blocked  []string `json:"blocked,omitempty"`
}

// Client calls one browser service.
type Client struct {
	endpoint string
	token    string
	http     *http.Client
}

// New returns a client of the browser service at base
// ("http://127.0.0.1:8086"), sending token as the bearer token, each
// render bounded by timeout.
func New(base, token string, timeout time.Duration) *Client {
	return &Client{endpoint: strings.TrimRight(base, "/") + "/render", token: token, http: &http.Client{Timeout: timeout, Transport: tracing.Transport(http.DefaultTransport, "browser")}}
}

// Render asks for url rendered. Errors name what failed: the browser's own
// refusal or failure (its message), or the call to it.
func (c *Client) Render(ctx context.Context, url string) (*Page, error) {
	body, _ := json.Marshal(map[string]string{"url": url})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("render %s: %w", url, err)
	}
	req.Header.Set("Content-Type", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("render %s: the browser service: %w", url, unwrapURL(err))
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes+1))
	if err != nil {
		return nil, fmt.Errorf("render %s: read the browser's answer: %w", url, err)
	}
	if len(data) > MaxResponseBytes {
		return nil, fmt.Errorf("render %s: the browser's answer is larger than %d bytes", url, MaxResponseBytes)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if json.Unmarshal(data, &e) == nil && e.Error.Message != "" {
			return nil, errors.New(e.Error.Message)
		}
		return nil, fmt.Errorf("render %s: the browser service answered HTTP %d", url, resp.StatusCode)
	}
	var p Page
	if err := json.Unmarshal(data, &p); err != nil {
		return nil, fmt.Errorf("render %s: the browser's answer: %w", url, err)
	}
	return &p, nil
}

func unwrapURL(err error) error {
	var ue interface{ Unwrap() error }
	if errors.As(err, &ue) {
		if inner := ue.Unwrap(); inner != nil {
			return inner
		}
	}
	return err
}
