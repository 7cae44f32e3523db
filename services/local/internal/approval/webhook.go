package approval

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/brain-tools/suite/pkg/tracing"
)

// WebhookTimeout bounds one webhook POST.
const WebhookTimeout = 10 * time.Second

// maxWebhooksInFlight bounds concurrent webhook POSTs; more new approvals
// than that at once wait their turn instead of opening a connection each.
const maxWebhooksInFlight = 8

// WebhookEvent is the JSON body POSTed to APPROVAL_WEBHOOK_URL for each new
// pending approval. URL is the operator page's link to it.
type WebhookEvent struct {
	Event       string    `json:"event"` // "approval.pending"
	ApprovalID  string    `json:"approval_id"`
	TenantID    string    `json:"tenant_id"`
	SessionID   string    `json:"session_id"`
	CallID      string    `json:"call_id"`
	Action      string    `json:"action"`
	Details     string    `json:"details"`
	DetailsHash string    `json:"details_sha256"`
	CreatedAt   time.Time `json:"created_at"`
	ExpiresAt   time.Time `json:"expires_at"`
	URL         string    `json:"url"`
}

// webhook announces new pending approvals. A nil *webhook does nothing.
// Delivery is best effort, once, in the background: a failure is logged and
// never holds up the approval, which the page shows either way.
type webhook struct {
	url    string
	secret []byte
	client *http.Client
	logger *slog.Logger
	sem    chan struct{}
	wg     sync.WaitGroup
}

func newWebhook(rawURL, secret string, logger *slog.Logger) (*webhook, error) {
	if rawURL == "" {
		return nil, nil
	}
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("approvals: APPROVAL_WEBHOOK_URL must be an http or https URL, got %q", rawURL)
	}
	return &webhook{
		url:    rawURL,
		secret: []byte(secret),
		client: &http.Client{
			Timeout:   WebhookTimeout,
			Transport: tracing.Transport(nil, "webhook"),
			// A webhook endpoint that redirects is misconfigured; following
			// it would send approval details somewhere nobody configured.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		logger: logger,
		sem:    make(chan struct{}, maxWebhooksInFlight),
	}, nil
}

// Signature returns the X-Approval-Signature value of body under secret:
// "sha256=" and the hex HMAC-SHA256.
func Signature(secret, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

func (w *webhook) send(a Approval, link string) {
	if w == nil {
		return
	}
	body, err := json.Marshal(WebhookEvent{
		Event: "approval.pending", ApprovalID: a.ID, TenantID: a.TenantID, SessionID: a.SessionID, CallID: a.CallID,
		Action: a.Action, Details: a.Details, DetailsHash: a.DetailsHash, CreatedAt: a.CreatedAt, ExpiresAt: a.ExpiresAt, URL: link,
	})
	if err != nil {
		w.logger.Error("webhook: encode", "approval_id", a.ID, "err", err)
		return
	}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		w.sem <- struct{}{}
		defer func() { <-w.sem }()
		if err := w.post(body); err != nil {
			w.logger.Warn("webhook", "approval_id", a.ID, "err", err)
		}
	}()
}

func (w *webhook) post(body []byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), WebhookTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("post webhook: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	if len(w.secret) > 0 {
		req.Header.Set("X-Approval-Signature", Signature(w.secret, body))
	}
	resp, err := w.client.Do(req)
	if err != nil {
		return fmt.Errorf("post webhook: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("post webhook: status %d", resp.StatusCode)
	}
	return nil
}

func (w *webhook) wait() {
	if w != nil {
		w.wg.Wait()
	}
}
