// Package store defines brain's durable state — sessions, tool calls and
// session events — and the Store interface that keeps it. Package
// store/sqlite implements it on an SQLite file (the embedded default, one
// brain process), store/postgres on PostgreSQL (any number of brain
// replicas on one database); store/storetest is the one suite both pass.
//
// Event IDs are assigned by the store when an event is appended, per
// session: 1, 2, 3… in commit order, never reused, so that an ID tells a
// tenant nothing of other sessions. When event N of a session has
// committed, so have 1..N-1: a reader that sees N can read every earlier
// one. Progress events are
// live-only and never reach a Store (the tool contract: "live-only
// tool.progress event").
package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Session statuses. A session starts active; interrupting it cancels its
// in-flight calls and refuses new ones; closing it does the same and is final.
const (
	SessionActive      = "active"
	SessionInterrupted = "interrupted"
	SessionClosed      = "closed"
)

// Tool call statuses, the ToolCall lifecycle of the peer platform (seed 001).
// A call is stored with its tool.call event as running (sent, or about to
// be), queued (held by its binding's max_concurrency until a slot frees) or
// requires_input (a function tool waiting for the application's answer, or
// a call behind an approval gate); the terminal statuses end it.
const (
	CallQueued        = "queued"
	CallRunning       = "running"
	CallRequiresInput = "requires_input"
	CallSucceeded     = "succeeded"
	CallFailed        = "failed"
	CallCancelled     = "cancelled"
	CallTimedOut      = "timed_out"
)

// CallStatuses lists every ToolCall status in lifecycle order.
var CallStatuses = []string{CallQueued, CallRunning, CallRequiresInput, CallSucceeded, CallFailed, CallCancelled, CallTimedOut}

// Terminal reports whether a call in status s has finished for good.
func Terminal(status string) bool {
	switch status {
	case CallSucceeded, CallFailed, CallCancelled, CallTimedOut:
		return true
	}
	return false
}

// Event types recorded or forwarded on a session's event stream.
const (
	EventToolCall           = "tool.call"
	EventToolRequiresInput  = "tool.requires_input" // the call waits for an answer (prompt, response_schema, response_expires_at)
	EventToolResponded      = "tool.responded"      // the answer, and who gave it
	EventToolProgress       = "tool.progress"       // live-only, never stored
	EventToolResult         = "tool.result"
	EventSessionCreated     = "session.created"
	EventSessionInterrupted = "session.interrupted"
	EventSessionClosed      = "session.closed"
	EventMCPUnavailable     = "mcp.unavailable"
	EventSessionTools       = "session.tools" // the session's tool set was replaced (PUT /sessions/{id}/tools)
)

// Session is one session of a tenant. Tools holds the tool names enabled in
// config.tools; Config is the config object as sent (stored, returned as is).
type Session struct {
	ID        string
	TenantID  string
	Status    string
	Harness   string
	Tools     []string
	Config    json.RawMessage
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Who made a call (the ToolCall's caller_type, as the peer names them).
const (
	CallerAPI    = "api"    // an application, through the HTTP API
	CallerSystem = "system" // brain itself: the approval call of a gated call
)

// What a call in requires_input waits for (Call.InputKind).
const (
	InputApproval = "approval" // an answer {approved, comment?} to an approval gate
	InputFunction = "function" // a function tool's result, given by the application
)

// Call is one tool call (the ToolCall resource). Result is the tool.Result
// JSON once the call finished, nil before.
type Call struct {
	ID        string
	SessionID string
	TenantID  string
	Tool      string
	Status    string
	Arguments json.RawMessage
	// Ord is the call's place in the order calls were stored: 1, 2, 3…
	// across sessions and tenants, set by CreateCall. Lists and a binding's
	// queue follow it.
	Ord int64
	// ParentID is the call this one was made for (the gated call of an
	// approval call); "" when the call is not nested.
	ParentID string
	// CallerType is CallerAPI or CallerSystem.
	CallerType string
	// SpanID is the call's trace span (16 hex digits), "" when brain was
	// not tracing when the call started.
	SpanID string
	// InputKind is InputApproval or InputFunction for a call that waits or
	// waited for input, "" for others. It stays set after the answer.
	InputKind string
	// Prompt, ResponseSchema and ResponseExpiresAt describe the answer a
	// call in requires_input waits for; empty (nil, zero) otherwise.
	Prompt            string
	ResponseSchema    json.RawMessage
	ResponseExpiresAt time.Time
	CreatedAt         time.Time
	StartedAt         time.Time // zero when not started
	FinishedAt        time.Time // zero while the call is not terminal
	ErrorCode         string
	ErrorMessage      string
	UnknownOutcome    bool
	// RevisionID is the custom-tool revision the call runs with; "" for a
	// tool of the host config or of the session's own tool set.
	RevisionID string
	// Retryable is set once the call failed, was cancelled or timed out:
	// whether the same call may be made again safely. nil otherwise.
	Retryable *bool
	Result    json.RawMessage
	// WithdrawUntil is set on an approval call that ended before brain
	// had withdrawn its approval (its gated call stopped waiting for it):
	// the approval's expiry, until which a brain sends the withdrawal
	// again should the one sending it stop. It is stored with the call's
	// end (FinishCall) and cleared by ClearWithdrawal; zero when no
	// withdrawal is pending.
	WithdrawUntil time.Time
}

// Event is one session event. ID is 0 until the store appends it; live-only
// events (tool.progress) keep ID 0.
type Event struct {
	ID        int64
	Type      string
	SessionID string
	CallID    string
	Time      time.Time
	Data      json.RawMessage
}

// CallFilter selects tool calls of one tenant; empty fields match all.
// Limit is the most calls returned (1..MaxListLimit); calls come oldest first.
type CallFilter struct {
	TenantID  string
	SessionID string
	Tool      string
	Status    string
	// After, when set, lists only calls created after the call with this
	// ID (which the caller has checked belongs to TenantID): paging.
	After string
	Limit int
}

// MaxListLimit is the most rows one list read returns.
const MaxListLimit = 1000

// ErrNotFound is returned when a session or call does not exist for the
// tenant asking — whether it does not exist at all or belongs to another
// tenant is deliberately not told apart.
var ErrNotFound = errors.New("not found")

// ErrCallsInFlight is SetSessionStatus's refusal while a call of the
// session is unfinished.
var ErrCallsInFlight = errors.New("session has calls in flight")

// StateError is returned when a write is refused because the session or call
// is in the wrong state; Status names the state it is in.
type StateError struct {
	What   string // "session" or "tool call"
	Status string
	// NotOwner, in a Shared store, says that the write was refused because
	// the call is not this replica's any more (errors.Is ErrNotOwner).
	NotOwner bool
}

func (e *StateError) Error() string {
	if e.NotOwner {
		return fmt.Sprintf("%s is %s and no longer this brain replica's: its lease ran out and another replica took it over", e.What, e.Status)
	}
	return fmt.Sprintf("%s is %s", e.What, e.Status)
}

// Is makes a StateError with NotOwner match ErrNotOwner.
func (e *StateError) Is(target error) bool { return target == ErrNotOwner && e.NotOwner }

// ErrNotOwner is the refusal, in a Shared store, of a replica's write to a
// call it does not own (any more): its lease on the call ran out and
// another replica claimed the call (ClaimExpired), and took it up or ended
// it. The write changed nothing; the replica is to stop the call here
// without recording anything for it. Returned as a *StateError with
// NotOwner set, naming the call's status.
var ErrNotOwner = errors.New("tool call owned by another brain replica")

// Signal kinds: what one brain replica tells the others through a shared
// store (PostgreSQL's LISTEN/NOTIFY). A signal is a hint; the database
// stays the source of truth (an event signal names an ID to read up to, not
// the event itself).
const (
	// SignalEvent: event Seq of SessionID committed.
	SignalEvent = "event"
	// SignalProgress: live-only tool.progress of CallID, Data its payload.
	SignalProgress = "progress"
	// SignalCancel: cancel CallID (the replica running it does); Data is
	// the cause as a JSON string.
	SignalCancel = "cancel"
	// SignalEndSession: cancel every call of SessionID (it is being
	// interrupted or closed).
	SignalEndSession = "end_session"
	// SignalSessionTools: the tool set of SessionID was replaced; drop
	// what you keep of it and read it again.
	SignalSessionTools = "session_tools"
	// SignalResync: the store's listener reconnected and may have missed
	// signals; every event stream re-reads the store. Never sent, only
	// delivered.
	SignalResync = "resync"
	// SignalAnswer: an answer to CallID was stored (PutAnswer); the
	// replica running the call takes it.
	SignalAnswer = "answer"
	// SignalAnswerSettled: answer Data (its ID, a JSON string) to CallID
	// was accepted or refused; the replica that stored it reads which.
	SignalAnswerSettled = "answer_settled"
	// SignalSlots: slots of max_concurrency changed hands for tenant
	// SessionID's binding CallID (the fields reused: no session or call is
	// meant); Data, when set, lists the queued calls that now hold one.
	SignalSlots = "slots"
)

// Signal is one message between brain replicas sharing a store.
type Signal struct {
	Kind      string          `json:"k"`
	From      string          `json:"f,omitempty"` // replica that sent it
	SessionID string          `json:"s,omitempty"`
	CallID    string          `json:"c,omitempty"`
	Seq       int64           `json:"q,omitempty"`
	Data      json.RawMessage `json:"d,omitempty"`
}

// Shared is a Store that several brain replicas use at once (PostgreSQL).
// Each replica opens it with an ID of its own; calls it creates are owned by
// it under a lease that it renews, and a call whose lease ran out belongs to
// a replica that died. Ownership fences the writes: UpdateCall, FinishCall
// and ClearWithdrawal of a call, CreateCall of an approval call for its
// gated call (ParentID), and the slot a call gives back (Admit's release)
// change nothing unless this replica owns the call (the parent) when the
// statement runs, and are refused with ErrNotOwner; so a replica paused
// past its lease, whose calls another one took over, cannot write for
// them, however long it was paused between a check and its write.
type Shared interface {
	Store
	// Replica is this replica's ID, the owner of the calls it creates.
	Replica() string
	// RenewLeases extends to until the lease of every unfinished call this
	// replica owns, and of every finished one with a pending withdrawal
	// (Call.WithdrawUntil), which its owner is sending, and returns those
	// of calls running (the calls this replica runs) that are stored and
	// not owned by it: another replica claimed them once their lease ran
	// out (the replica was paused, or cut off from the database, for
	// longer than a lease), or they finished (a call this replica just
	// finished is among them: the caller tells them apart).
	RenewLeases(ctx context.Context, until time.Time, running []string) (notOwned []string, err error)
	// ClaimExpired takes over up to limit unfinished calls, or finished
	// ones with a pending withdrawal, whose lease ran out before now (their
	// replica died), leasing them to this replica until `until` so that no
	// other one takes them too, and returns them.
	ClaimExpired(ctx context.Context, now, until time.Time, limit int) ([]*Call, error)
	// ReleaseClaims gives up this replica's lease of the calls ids (unknown
	// ones, and ones another replica owns, are left alone): their lease ends
	// now, so that the next ClaimExpired, of any replica, takes them up
	// again. For calls a replica claimed and could not take up.
	ReleaseClaims(ctx context.Context, ids []string) error
	// PutToken records an inspection token, by its SHA-256, for reading
	// sessionID's events while call callID is unfinished.
	PutToken(ctx context.Context, hash [32]byte, tenantID, sessionID, callID string) error
	// DeleteToken removes an inspection token (its call returned).
	DeleteToken(ctx context.Context, hash [32]byte) error
	// Token returns what an inspection token allows, or ErrNotFound when it
	// is unknown or its call has finished.
	Token(ctx context.Context, hash [32]byte) (tenantID, sessionID, callID string, err error)
	// Notify sends sig to every other replica (From is set to Replica).
	// ErrSignalTooLarge when it does not fit one notification.
	Notify(ctx context.Context, sig Signal) error

	// PutAnswer stores a (ID, CallID, Body, APIKey, CreatedAt set) as
	// pending while its call is in requires_input, and signals
	// SignalAnswer; *StateError naming the call's status otherwise,
	// ErrNotFound when there is no call a.CallID.
	PutAnswer(ctx context.Context, a *Answer) error
	// TakeAnswers moves the pending answers of call callID to taken and
	// returns them, oldest first, when this replica owns the call (none
	// otherwise): the replica running the call offers them to it.
	TakeAnswers(ctx context.Context, callID string) ([]*Answer, error)
	// PendingAnswers lists the calls that have pending answers.
	PendingAnswers(ctx context.Context) ([]string, error)
	// SettleAnswer moves taken answer id to status (AnswerAccepted or
	// AnswerRefused, with reason) and signals SignalAnswerSettled.
	SettleAnswer(ctx context.Context, id, callID, status, reason string) error
	// GetAnswer returns answer id, or ErrNotFound.
	GetAnswer(ctx context.Context, id string) (*Answer, error)
	// WithdrawAnswer moves answer id from pending to withdrawn, and
	// reports whether it did (false: it was taken already).
	WithdrawAnswer(ctx context.Context, id string) (bool, error)
	// DeleteAnswer removes answer id.
	DeleteAnswer(ctx context.Context, id string) error

	// Admit gives the free slots of q to the calls queued first (by Ord),
	// after the call release (when set) gave its slot back, in one
	// transaction under q's lock, and returns the queued calls of q that
	// hold a slot (they may go on). When it gave out slots it signals
	// SignalSlots with the calls admitted.
	Admit(ctx context.Context, q Queue, release string) ([]string, error)
	// Queued counts the calls of q waiting for a slot.
	Queued(ctx context.Context, q Queue) (int, error)
	// QueuePosition is the place of call id among the calls of q waiting
	// for a slot, 1 for the next to go; 0 when it does not wait (it holds
	// a slot, or is not queued).
	QueuePosition(ctx context.Context, q Queue, id string) (int, error)
}

// Answer is an answer to a call in requires_input given through a replica
// that does not run the call: POST /tool_calls/{id}/respond's body as
// sent, and the env name of the API key that sent it.
type Answer struct {
	ID     string
	CallID string
	Body   json.RawMessage
	APIKey string
	// Status is AnswerPending until the call's replica takes it, then
	// AnswerTaken, then AnswerAccepted or AnswerRefused (with Reason);
	// AnswerWithdrawn when the replica that stored it gave up first.
	Status    string
	Reason    string
	CreatedAt time.Time
}

// Answer statuses.
const (
	AnswerPending   = "pending"
	AnswerTaken     = "taken"
	AnswerAccepted  = "accepted"
	AnswerRefused   = "refused"
	AnswerWithdrawn = "withdrawn"
)

// Queue is a binding's max_concurrency queue of one tenant in a shared
// store: its calls queued, running or waiting for input hold slots (at most
// Max) or wait for one in the order they were stored (Call.Ord).
type Queue struct {
	TenantID, Tool string
	Max            int
}

// ErrSignalTooLarge is Notify's refusal of a signal past the store's
// notification limit (PostgreSQL: under 8000 bytes).
var ErrSignalTooLarge = errors.New("signal too large for one notification")

// Removed counts what one DeleteEnded removed.
type Removed struct {
	Sessions, Calls, Events int64
}

// Total is every row removed.
func (r Removed) Total() int64 { return r.Sessions + r.Calls + r.Events }

// Ended reports whether a session in status s has ended: interrupted or
// closed, so no call of it can start and none is in flight (ending a
// session waits for its calls to finish).
func Ended(status string) bool {
	return status == SessionInterrupted || status == SessionClosed
}

// Store keeps sessions, tool calls and events durably. Every write that takes
// an *Event appends it in the same transaction and sets its ID; the write has
// committed when the method returns nil. Implementations deliver appended
// events to their commit hook after commit, with IDs rising within a
// session; one that shares its database with other writers may leave out
// an event a later one of the same session has overtaken (readers fill such
// a gap from Events, see the package doc).
type Store interface {
	// Catalog keeps tenants' custom tools, secrets, toolsets and session
	// tool sets (catalog.go).
	Catalog

	// CreateSession inserts s and appends evs in order (session.created,
	// then any mcp.unavailable).
	CreateSession(ctx context.Context, s *Session, evs ...*Event) error
	// Session returns the tenant's session id, or ErrNotFound.
	Session(ctx context.Context, tenantID, id string) (*Session, error)
	// SetSessionStatus moves the tenant's session id to status to, when its
	// current status is one of from and none of its calls is unfinished,
	// and appends ev. ErrNotFound when there is no such session,
	// *StateError when the status is not in from, ErrCallsInFlight when a
	// call of the session is still queued, running or waiting (a call
	// another replica created while this one was ending the session). The
	// check and the move are one transaction, under the lock that
	// CreateCall takes, so no call can start in between.
	SetSessionStatus(ctx context.Context, tenantID, id string, from []string, to string, at time.Time, ev *Event) error

	// CreateCall inserts c, sets c.Ord, and appends evs (tool.call first,
	// then tool.requires_input for a call stored waiting), only while c's
	// session is active; otherwise *StateError naming the session's status.
	CreateCall(ctx context.Context, c *Call, evs ...*Event) error
	// UpdateCall moves an unfinished call on: it stores c's status,
	// started_at, input_kind, prompt, response_schema and
	// response_expires_at when the stored status is one of from (else
	// *StateError naming it; ErrNotFound when there is no call c.ID), and
	// appends evs.
	UpdateCall(ctx context.Context, c *Call, from []string, evs ...*Event) error
	// FinishCall stores c's terminal status, error, retryable, result and
	// finished_at (and its prompt and response fields, which a finished call
	// no longer has), and its pending withdrawal (WithdrawUntil), only while
	// the stored call is not terminal (else *StateError), and appends evs
	// (tool.result last). In a Shared store a call with a pending
	// withdrawal stays leased to the replica that finished it.
	FinishCall(ctx context.Context, c *Call, evs ...*Event) error
	// PendingWithdrawals lists every call with a pending withdrawal
	// (WithdrawUntil set), of every tenant, in Ord order (start-up
	// recovery: the brain that was sending them stopped).
	PendingWithdrawals(ctx context.Context) ([]*Call, error)
	// ClearWithdrawal clears the pending withdrawal of call id: it was
	// sent, or is no longer needed. Nothing to clear is no error.
	ClearWithdrawal(ctx context.Context, id string) error
	// Call returns the tenant's call id, or ErrNotFound.
	Call(ctx context.Context, tenantID, id string) (*Call, error)
	// Calls lists the calls matching f, oldest first; f.Limit is
	// 1..MaxListLimit+1, as for Events.
	Calls(ctx context.Context, f CallFilter) ([]*Call, error)
	// UnfinishedCalls lists every call left queued, running or
	// requires_input, of every tenant, in Ord order (start-up recovery).
	UnfinishedCalls(ctx context.Context) ([]*Call, error)
	// ActiveSessions counts the active sessions of every tenant (brain's
	// sessions_active gauge, read at each scrape of /metrics).
	ActiveSessions(ctx context.Context) (int, error)

	// Events lists up to limit stored events of session sessionID with ID >
	// after, in ID order; limit is 1..MaxListLimit+1 (one more than a page
	// tells whether another follows), larger or 0 reads as MaxListLimit+1.
	// The caller has checked the session's tenant.
	Events(ctx context.Context, sessionID string, after int64, limit int) ([]Event, error)

	// DeleteEnded removes sessions that ended (Ended) before `before`,
	// oldest first, with their calls and events: at most limit rows in all,
	// in one short transaction, so that retention never holds writers up
	// for long. A session goes last, once nothing of it is left, so a
	// session half removed is still found (and removed) by the next call.
	// A session with a call whose withdrawal is pending (WithdrawUntil)
	// is kept until that is cleared: the next brain sends it from that row.
	// It returns what it removed; zero means nothing is left to remove.
	DeleteEnded(ctx context.Context, before time.Time, limit int) (Removed, error)

	// Close waits for pending writes and closes the store.
	Close() error
}
