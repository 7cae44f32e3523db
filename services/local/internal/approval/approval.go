// Package approval records a person's answer to an agent's request for
// approval: the request_approval tool (an SSE stream that waits for the
// operator), the approval_start / approval_status / approval_cancel job tools
// for waits that outlast a call, durable storage of approvals and of an
// append-only decision log in SQLite, expiry, and the optional webhook that
// announces each new pending approval. The operator page that answers them
// lives in package operator.
//
// An approval records an answer; it grants nothing by itself. The service
// that performs the action must still check its own authorization (the
// contract's "Enforce approvals where the action happens").
package approval

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/brain-tools/suite/pkg/jobs"
)

// Status is where an approval stands. It starts pending and moves exactly
// once to one of the four final statuses.
type Status string

// The statuses of an approval.
const (
	Pending   Status = "pending"
	Approved  Status = "approved"
	Denied    Status = "denied"
	Expired   Status = "expired"   // nobody answered before expires_at
	Cancelled Status = "cancelled" // the caller withdrew it or dropped its stream
)

// Final reports whether s is a decided status.
func (s Status) Final() bool { return s != Pending }

// JobState maps s onto the job pattern's states: pending is running,
// approved succeeded, denied and expired failed, cancelled cancelled.
func (s Status) JobState() jobs.State {
	switch s {
	case Pending:
		return jobs.Running
	case Approved:
		return jobs.Succeeded
	case Cancelled:
		return jobs.Cancelled
	}
	return jobs.Failed
}

// Origin tells which tool created an approval: a request_approval stream,
// whose drop cancels it, or approval_start, whose caller polls.
type Origin string

// The origins of an approval.
const (
	OriginStream Origin = "request_approval"
	OriginJob    Origin = "approval_start"
)

// Limits of the request arguments, enforced by the tools and published in
// their input schemas.
const (
	MaxActionChars  = 500
	MaxDetailsChars = 16384
	MaxCommentChars = 2000
	// MaxStreamTimeoutSeconds caps timeout_seconds of request_approval,
	// whose binding allows StreamBindingTimeoutSeconds: the stream answers
	// "expired" before the host gives up on the call.
	MaxStreamTimeoutSeconds = 3600
	// MaxJobTimeoutSeconds caps timeout_seconds of approval_start: a day,
	// the contract's largest timeout.
	MaxJobTimeoutSeconds  = 86400
	DefaultTimeoutSeconds = 300
)

// Approval is one request for approval and, once decided, its answer.
type Approval struct {
	// ID has 128 random bits (jobs.NewID).
	ID string
	// TenantID, SessionID and CallID come from the tool request body, never
	// from arguments. The three together identify the approval: the same
	// call sent again attaches to it.
	TenantID  string
	SessionID string
	CallID    string
	Origin    Origin
	// Action and Details are exactly what the agent asked to do.
	Action  string
	Details string
	// DetailsHash is the hex SHA-256 of the canonical JSON
	// {"action":...,"details":...}: the decision log binds each answer to
	// exactly what the operator saw.
	DetailsHash string
	Status      Status
	CreatedAt   time.Time
	ExpiresAt   time.Time
	// DecidedAt, Operator and Comment are set once the status is final.
	// Operator is the operator's name, or "system" for expiry and
	// cancellation.
	DecidedAt time.Time
	Operator  string
	Comment   string
	// WithdrawnAt is set when the caller withdrew the approval
	// (approval_cancel) after an operator had approved or denied it: the
	// caller had stopped waiting (it was answered another way, or its call
	// ended), so the decision is recorded but was not used. The first such
	// withdrawal's time; zero otherwise.
	WithdrawnAt time.Time
}

// DecisionNotUsed reports whether the operator's decision on a was
// recorded after its caller had stopped waiting, which then withdrew it:
// see WithdrawnAt.
func (a Approval) DecisionNotUsed() bool { return !a.WithdrawnAt.IsZero() }

// SystemOperator is the Operator of decisions nobody made: expiry and
// cancellation.
const SystemOperator = "system"

// HashDetails returns the hex SHA-256 of {"action":action,"details":details}.
func HashDetails(action, details string) string {
	b, _ := json.Marshal(struct {
		Action  string `json:"action"`
		Details string `json:"details"`
	}{action, details})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// LogEntry is one row of the append-only decision log.
type LogEntry struct {
	Seq         int64
	ApprovalID  string
	Decision    Status
	Operator    string
	Comment     string
	DetailsHash string
	At          time.Time
}

// ErrNotFound is the answer for an unknown approval ID, and for one of
// another tenant wherever a tenant asks.
var ErrNotFound = errors.New("approval not found")

// ErrTooManyPending is the answer to a new request from a tenant that has
// the most pending approvals allowed (APPROVAL_MAX_PENDING_PER_TENANT).
var ErrTooManyPending = errors.New("too many pending approvals for this tenant")

// ErrOtherRequest is the answer to a tool call sent again with another
// action or details than the approval it already requested.
var ErrOtherRequest = errors.New("already requested approval")

// ErrDecided is wrapped by *DecidedError.
var ErrDecided = errors.New("approval already decided")

// DecidedError is the answer to a decision on an approval that is no longer
// pending: already approved or denied (first answer wins), expired, or
// cancelled. Current is the approval as it stands.
type DecidedError struct {
	Current Approval
}

func (e *DecidedError) Error() string {
	switch e.Current.Status {
	case Expired:
		return fmt.Sprintf("approval %s expired at %s and can no longer be answered", e.Current.ID, e.Current.ExpiresAt.UTC().Format(time.RFC3339))
	case Cancelled:
		return fmt.Sprintf("approval %s was cancelled at %s and can no longer be answered", e.Current.ID, e.Current.DecidedAt.UTC().Format(time.RFC3339))
	}
	return fmt.Sprintf("approval %s already decided: %s by %s at %s", e.Current.ID, e.Current.Status, e.Current.Operator, e.Current.DecidedAt.UTC().Format(time.RFC3339))
}

func (e *DecidedError) Unwrap() error { return ErrDecided }

// Args are what request_approval and approval_start share of their
// arguments (streamArgs, jobArgs); the tools' input_schema is inferred
// from them. The limits in the schema tags are MaxActionChars and
// MaxDetailsChars (TestArgsSchemaLimits); Validate refuses a NUL in
// either (NoNUL).
type Args struct {
	Action  string `json:"action" jsonschema:"What you want to do, in one line, e.g. \"Delete 14 files in /srv/reports\"." schema:"minLength=1,maxLength=500"`
	Details string `json:"details,omitempty" jsonschema:"Everything the operator needs to decide: the exact command, the objects affected, why." schema:"maxLength=16384"`
}

// Validate refuses a NUL in action or details, which the store keeps as
// text (see NoNUL); streamArgs and jobArgs have it through Args.
func (a *Args) Validate() error {
	if err := NoNUL("action", a.Action); err != nil {
		return err
	}
	return NoNUL("details", a.Details)
}

// NoNUL refuses a NUL (U+0000) in v, the value of field: for every string
// the store keeps in a text column or finds a row by. PostgreSQL's text
// holds no NUL (a statement carrying one fails, invalid byte sequence for
// encoding "UTF8": 0x00) where SQLite's does, so without this the two
// stores would answer the same request differently, PostgreSQL with an
// internal error after it had recorded nothing. The tools answer its error
// as an is_error result, the operator page as a 400; the words are brain's
// for the same rule (its noNUL).
func NoNUL(field, v string) error {
	if strings.IndexByte(v, 0) >= 0 {
		return fmt.Errorf("%s: must not contain NUL (U+0000)", field)
	}
	return nil
}

// timeout is how long the operator has to answer before the approval
// expires: the timeout_seconds argument, DefaultTimeoutSeconds when it is
// absent.
func timeout(seconds *int) time.Duration {
	if seconds == nil {
		return DefaultTimeoutSeconds * time.Second
	}
	return time.Duration(*seconds) * time.Second
}
