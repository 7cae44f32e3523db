package approval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/brain-tools/suite/pkg/httpapi"
	"github.com/brain-tools/suite/pkg/jobs"
	"github.com/brain-tools/suite/pkg/schema"
	"github.com/brain-tools/suite/pkg/service"
	"github.com/brain-tools/suite/pkg/tool"
)

// StreamBindingTimeoutSeconds is request_approval's binding timeout: the
// longest operator wait plus a minute, so the "expired" result reaches the
// host before the host's own limit cuts the call.
const StreamBindingTimeoutSeconds = MaxStreamTimeoutSeconds + 60

// CallerOperator is the Operator recorded when the calling agent withdraws
// its request with approval_cancel.
const CallerOperator = "caller"

// Progress is the payload of request_approval's progress event, sent as
// soon as the approval is recorded.
type Progress struct {
	Status     string    `json:"status"` // "waiting_for_operator"
	ApprovalID string    `json:"approval_id"`
	URL        string    `json:"url"`
	ExpiresAt  time.Time `json:"expires_at"`
}

// Decision is the structured_content of a decided approval's result, and
// request_approval's output_schema.
type Decision struct {
	ApprovalID  string    `json:"approval_id"`
	Decision    Status    `json:"decision" schema:"enum=approved|denied|expired|cancelled"`
	Operator    string    `json:"operator" jsonschema:"Who decided: an operator's name, system (expired) or caller (withdrawn)."`
	Comment     string    `json:"comment"`
	DecidedAt   time.Time `json:"decided_at"`
	Action      string    `json:"action"`
	DetailsHash string    `json:"details_sha256"`
	RequestedAt time.Time `json:"requested_at"`
	ExpiresAt   time.Time `json:"expires_at"`
}

// Result is the tool result of a decided approval: approved is a success;
// denied, expired and cancelled are is_error results whose text says which,
// so that an expiry never reads as a person's denial. All carry Decision as
// structured_content. It returns nil for a pending approval.
func Result(a Approval) *tool.Result {
	if !a.Status.Final() {
		return nil
	}
	when := a.DecidedAt.UTC().Format(time.RFC3339)
	comment := ""
	if a.Comment != "" {
		comment = fmt.Sprintf(" Comment: %q", a.Comment)
	}
	var text string
	switch a.Status {
	case Approved:
		text = fmt.Sprintf("Approved by operator %s at %s.%s", a.Operator, when, comment)
	case Denied:
		text = fmt.Sprintf("Denied by operator %s at %s.%s", a.Operator, when, comment)
	case Expired:
		text = fmt.Sprintf("Expired: no operator answered approval %s before %s. Nobody denied it; nobody approved it either, so do not go ahead.",
			a.ID, a.ExpiresAt.UTC().Format(time.RFC3339))
	case Cancelled:
		text = fmt.Sprintf("Cancelled at %s before an operator answered (%s). No operator decided.", when, a.Comment)
	}
	if a.DecisionNotUsed() {
		// Text only: Decision is request_approval's closed output_schema,
		// and the caller that withdrew knows it did.
		text += fmt.Sprintf(" The caller withdrew the request at %s, after this decision: the decision was not used.", a.WithdrawnAt.UTC().Format(time.RFC3339))
	}
	data, _ := json.Marshal(Decision{
		ApprovalID: a.ID, Decision: a.Status, Operator: a.Operator, Comment: a.Comment, DecidedAt: a.DecidedAt,
		Action: a.Action, DetailsHash: a.DetailsHash, RequestedAt: a.CreatedAt, ExpiresAt: a.ExpiresAt,
	})
	return &tool.Result{Content: []tool.Content{tool.Text(text)}, IsError: a.Status != Approved, StructuredContent: data}
}

// streamArgs are request_approval's arguments.
type streamArgs struct {
	Args
	TimeoutSeconds *int `json:"timeout_seconds,omitempty" jsonschema:"How long the operator has to answer before the request expires." schema:"minimum=1,maximum=3600,default=300"`
}

// jobArgs are approval_start's: a longer cap on timeout_seconds.
type jobArgs struct {
	Args
	TimeoutSeconds *int `json:"timeout_seconds,omitempty" jsonschema:"How long the operator has to answer before the request expires." schema:"minimum=1,maximum=86400,default=300"`
}

// jobSpec is the job pattern's view of approvals.
func (s *Service) jobSpec() jobs.Spec {
	return jobs.Spec{Prefix: "approval", Noun: "approval", IDField: "approval_id", Backend: backend{s}}
}

// Tools returns request_approval, approval_start, approval_status and
// approval_cancel. Every one authorizes by the request's tenant_id (and
// records session_id and call_id), never by arguments; approval_status and
// approval_cancel find an approval by its approval_id within the tenant, or
// by the call_id of the call that created it within the tenant's session.
func (s *Service) Tools() []service.Tool {
	request := service.NewTool(tool.Binding{
		Name:  "request_approval",
		Title: "Request approval",
		Description: "Ask a human operator to approve an action and wait for the answer. " +
			"The result says approved (go ahead), denied (is_error, with the operator's comment) or expired (is_error: nobody answered in time). " +
			"Describe the action exactly: the operator sees action and details as you write them. " +
			"If this call fails with unknown_outcome (the connection to the service broke while waiting), the approval may still be pending or decided: " +
			"ask approval_status with call_id set to the ID of this call.",
		OutputSchema:   decisionSchema,
		TimeoutSeconds: StreamBindingTimeoutSeconds,
		Annotations:    asksAPerson(),
	}, s.request)
	request.Waits = true // an operator may take hours: its stream is handed over from net/http
	start := service.NewTool(tool.Binding{
		Name:  "approval_start",
		Title: "Start an approval request",
		Description: "Ask a human operator to approve an action without waiting: returns an approval_id at once. " +
			"Check the answer later with approval_status (it can wait up to 20 s per call); withdraw the request with approval_cancel. " +
			"Use it when the operator may take longer than one call can wait. " +
			"If this call fails with unknown_outcome, ask approval_status with call_id set to the ID of this call.",
		OutputSchema:   jobs.OutputSchema("approval_id"),
		TimeoutSeconds: 60,
		Annotations:    asksAPerson(),
	}, s.start)
	return []service.Tool{request, start, s.statusTool(), s.cancelTool()}
}

// decisionSchema is request_approval's output_schema: Decision's.
var decisionSchema = schema.MustFor[Decision]()

// asksAPerson are the annotations of request_approval and approval_start:
// they add a request to the approval queue and destroy nothing; a new call
// asks again (not idempotent); and they reach outside the service, to a
// person and to the notification webhook (open world, the MCP default).
func asksAPerson() *tool.Annotations {
	f := false
	return &tool.Annotations{DestructiveHint: &f}
}

func (s *Service) newApproval(call *service.Call, a Args, timeoutSeconds *int, origin Origin) NewApproval {
	return NewApproval{
		TenantID: call.TenantID, SessionID: call.SessionID, CallID: call.CallID, Origin: origin,
		Action: a.Action, Details: a.Details, Timeout: timeout(timeoutSeconds),
	}
}

// request is request_approval: record (or attach to) the call's approval,
// report waiting_for_operator at once, wait for the decision, answer it.
// If the host drops the stream and does not send the call again within
// ReattachGrace, the approval is cancelled. Its frame is
// what every waiting stream keeps on its stack, so the work before and
// after the wait is in openStream and streamResult.
func (s *Service) request(ctx context.Context, call *service.Call, args streamArgs) (*tool.Result, error) {
	// The call waits for an operator: its stream starts before the store
	// is asked, so the connection is handed over at once (Call.Stream).
	// That and recording the approval (the store, the log line, the
	// progress event's encoding) run deep; they run on a goroutine of
	// their own, so that this one, which then waits for hours, never grows
	// its stack past a few KiB.
	if r := refuseIdentity(call); r != nil {
		return r, nil
	}
	var id string
	var r *tool.Result
	offStack(func() {
		call.Stream()
		id, r = s.openStream(ctx, call, args.Args, args.TimeoutSeconds)
	})
	if r != nil {
		return r, nil
	}
	decided, err := s.wait(ctx, call.TenantID, id)
	last := s.detach(id)
	return s.streamResult(ctx, call, id, decided, err, last), nil
}

// openStream records (or finds) the call's approval and reports it
// waiting; a result when it is already decided or cannot be recorded.
func (s *Service) openStream(ctx context.Context, call *service.Call, args Args, timeoutSeconds *int) (string, *tool.Result) {
	a, _, err := s.Request(ctx, s.newApproval(call, args, timeoutSeconds, OriginStream))
	if err != nil {
		return "", refuse(call, err)
	}
	if r := Result(a); r != nil {
		return "", r
	}
	s.attach(a.ID)
	if err := call.Progress(Progress{Status: "waiting_for_operator", ApprovalID: a.ID, URL: s.URL(a.ID), ExpiresAt: a.ExpiresAt}); err != nil {
		call.Logger.Warn("approval progress", "approval_id", a.ID, "err", err)
	}
	return a.ID, nil
}

// streamResult answers a stream whose wait ended with decided and err
// (ctx is the stream's); last says no other stream waits on the approval.
func (s *Service) streamResult(ctx context.Context, call *service.Call, id string, decided *Approval, err error, last bool) *tool.Result {
	switch {
	case err == nil:
		return Result(*decided)
	case errors.Is(err, errShuttingDown):
		return &tool.Result{Content: []tool.Content{tool.Text(fmt.Sprintf(
			"The approval service is restarting. Approval %s is still pending and keeps its place: ask approval_status with approval_id %q for the decision.", id, id))},
			IsError: true, UnknownOutcome: true}
	case ctx.Err() != nil:
		// The host dropped the stream (session interrupted or closed, call
		// cancelled or timed out): nobody is left to act on an answer.
		// The caller may come back with the same call within the grace
		// (brain does, after a dropped connection or its restart); the
		// approval is withdrawn only if it does not.
		if last && s.life.Err() == nil {
			s.withdrawDropped(id, call.Logger)
		}
		return tool.Errorf("approval %s: the caller stopped waiting", id)
	default:
		why := storeFault(call, "wait for approval", err, "approval_id", id)
		return &tool.Result{Content: []tool.Content{tool.Text(fmt.Sprintf("approval %s: %s while waiting; ask approval_status with approval_id %q", id, why, id))},
			IsError: true, UnknownOutcome: true}
	}
}

// start is approval_start: record (or find) the call's approval and answer
// its ID at once.
func (s *Service) start(ctx context.Context, call *service.Call, args jobArgs) (*tool.Result, error) {
	if r := refuseIdentity(call); r != nil {
		return r, nil
	}
	a, _, err := s.Request(ctx, s.newApproval(call, args.Args, args.TimeoutSeconds, OriginJob))
	if err != nil {
		return refuse(call, err), nil
	}
	return jobs.StartedResult(s.jobSpec(), jobStatus(a), map[string]any{
		"url": s.URL(a.ID), "expires_at": a.ExpiresAt, "status": a.Status,
	}), nil
}

// refuseIdentity refuses, before the store sees it, a call whose
// tenant_id, session_id or call_id holds a NUL (NoNUL): the store keeps
// all three with an approval and finds approvals by them. They are the
// request's, not the arguments', hence "invalid request" (the
// arguments' own checks say "invalid arguments").
func refuseIdentity(call *service.Call) *tool.Result {
	err := NoNUL("tenant_id", call.TenantID)
	if err == nil {
		err = NoNUL("session_id", call.SessionID)
	}
	if err == nil {
		err = NoNUL("call_id", call.CallID)
	}
	if err != nil {
		return tool.Errorf("invalid request: %v", err)
	}
	return nil
}

func refuse(call *service.Call, err error) *tool.Result {
	if errors.Is(err, ErrOtherRequest) || errors.Is(err, ErrTooManyPending) {
		return tool.Errorf("%v", err)
	}
	return &tool.Result{Content: []tool.Content{tool.Text("could not record the approval request: " + storeFault(call, "record approval", err))}, IsError: true, UnknownOutcome: true}
}

// storeFault logs err, the store's failure behind what, and words it for
// a tool's result: a database that did not answer (httpapi.Unreachable) is
// a state to wait out, logged as a warning and said so; anything else is
// an internal error, logged as an error. The cause is never in the words.
func storeFault(call *service.Call, what string, err error, attrs ...any) string {
	call.Logger.Log(context.Background(), httpapi.FailureLevel(err), what, append(attrs, "err", err)...)
	if httpapi.Unreachable(err) {
		return "the approvals database did not answer; retry shortly"
	}
	return "internal error"
}

func jobStatus(a Approval) jobs.Status {
	return jobs.Status{ID: a.ID, State: a.Status.JobState(), CreatedAt: a.CreatedAt, FinishedAt: a.DecidedAt, Result: Result(a)}
}

// backend serves approval_status and approval_cancel from the store.
type backend struct{ s *Service }

var _ jobs.Backend = backend{}

// Status and Cancel look an approval up by the owner's tenant only, the
// scope approvals had before jobs.Owner carried the session too; narrowing
// it to the session is the approval service's own decision.
func (b backend) Status(ctx context.Context, owner jobs.Owner, id string, wait time.Duration) (jobs.Status, error) {
	tenant := owner.Tenant
	if wait > 0 {
		wctx, cancel := context.WithTimeout(ctx, wait)
		_, err := b.s.Wait(wctx, tenant, id)
		cancel()
		if errors.Is(err, ErrNotFound) {
			return jobs.Status{}, jobs.ErrNotFound
		}
		// Any other end of the wait (decided, waited long enough, shutting
		// down) is answered with the approval as it now stands.
	}
	a, err := b.s.store.GetForTenant(ctx, tenant, id)
	if err == nil && !a.Status.Final() && !time.Now().Before(a.ExpiresAt) {
		a, err = b.s.Decide(ctx, id, Expired, SystemOperator, "no answer before the approval expired")
		if errors.Is(err, ErrDecided) {
			err = nil
		}
	}
	if errors.Is(err, ErrNotFound) {
		return jobs.Status{}, jobs.ErrNotFound
	}
	if err != nil {
		return jobs.Status{}, err
	}
	return jobStatus(a), nil
}

func (b backend) Cancel(ctx context.Context, owner jobs.Owner, id string) (jobs.Status, error) {
	tenant := owner.Tenant
	if _, err := b.s.store.GetForTenant(ctx, tenant, id); errors.Is(err, ErrNotFound) {
		return jobs.Status{}, jobs.ErrNotFound
	} else if err != nil {
		return jobs.Status{}, err
	}
	a, err := b.s.Withdraw(ctx, id)
	if err != nil && !errors.Is(err, ErrDecided) {
		return jobs.Status{}, err
	}
	return jobStatus(a), nil
}

// offStack runs f on a short-lived goroutine and waits for it; a panic
// in f is raised again on the caller's goroutine, as if f had run there.
func offStack(f func()) {
	done := make(chan any, 1)
	go func() {
		defer func() { done <- recover() }()
		f()
	}()
	if v := <-done; v != nil {
		panic(v)
	}
}
