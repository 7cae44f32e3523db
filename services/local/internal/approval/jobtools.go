package approval

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/brain-tools/suite/pkg/jobs"
	"github.com/brain-tools/suite/pkg/service"
	"github.com/brain-tools/suite/pkg/tool"
)

// MaxCallIDChars caps the call_id argument of approval_status and
// approval_cancel. Brain's call IDs are a few dozen characters; the cap
// only bounds the lookup of an ID that could not be one.
const MaxCallIDChars = 1024

// maxWaitSeconds caps approval_status's wait_seconds: the answer is one
// JSON response and must beat the host's 30 s header limit.
const maxWaitSeconds = int(jobs.DefaultMaxWait / time.Second)

// ref names one approval in the arguments of approval_status and
// approval_cancel: exactly one of its approval_id, or the call_id of the
// request_approval or approval_start call that created it. The call_id is
// what an agent still holds when that call ended with unknown_outcome
// before it saw the approval_id (the ID travels only in a live progress
// event, which the host does not keep).
//
// "Exactly one" is the one rule the inferred schema cannot say; Validate
// (check) holds it, naming both fields.
type ref struct {
	ApprovalID *string `json:"approval_id,omitempty" jsonschema:"The approval_id that request_approval (in its progress event or result) or approval_start returned. Give this or call_id, not both." schema:"pattern=^[a-z2-7]{26}$"`
	CallID     *string `json:"call_id,omitempty" jsonschema:"The ID of your own request_approval or approval_start call in this session that created the approval. Use it when you do not have the approval_id, e.g. after that call failed with unknown_outcome. Give this or approval_id, not both." schema:"minLength=1,maxLength=1024"`
}

func (r *ref) check() error {
	switch {
	case r.ApprovalID == nil && r.CallID == nil:
		return errors.New("approval_id or call_id: required: give exactly one of them")
	case r.ApprovalID != nil && r.CallID != nil:
		return errors.New("approval_id and call_id: give only one of them, not both")
	case r.CallID != nil:
		// The store finds the approval by it (approval_id's pattern
		// already keeps a NUL out).
		return NoNUL("call_id", *r.CallID)
	}
	return nil
}

type statusArgs struct {
	ref
	WaitSeconds int `json:"wait_seconds,omitempty" jsonschema:"Wait up to this many seconds for the operator's decision before answering. Default 0." schema:"minimum=0,maximum=20"`
}

func (a *statusArgs) Validate() error { return a.check() }

type cancelArgs struct{ ref }

func (a *cancelArgs) Validate() error { return a.check() }

func (s *Service) statusTool() service.Tool {
	return service.NewTool(tool.Binding{
		Name:  "approval_status",
		Title: "Approval status",
		Description: "Tell the state of an approval asked with request_approval or approval_start: running (pending), succeeded (approved), " +
			"failed (denied or expired) or cancelled, with the decision once there is one. " +
			"Name the approval with exactly one of approval_id or call_id (the ID of the request_approval or approval_start call in this session that created it); " +
			"after such a call failed with unknown_outcome, use its call_id: the approval may still be pending, or already decided. " +
			fmt.Sprintf("Set wait_seconds (at most %d) to wait for the decision first.", maxWaitSeconds),
		OutputSchema:   jobs.OutputSchema("approval_id"),
		TimeoutSeconds: 60,
		Annotations:    tool.ReadOnly(),
	}, func(ctx context.Context, call *service.Call, args statusArgs) (*tool.Result, error) {
		if res := refuseIdentity(call); res != nil {
			return res, nil
		}
		id, res := s.resolve(ctx, call, "approval_status", args.ref)
		if res != nil {
			return res, nil
		}
		st, err := backend{s}.Status(ctx, jobs.CallOwner(call), id, time.Duration(args.WaitSeconds)*time.Second)
		return jobAnswer("status", id, st, err, call), nil
	})
}

func (s *Service) cancelTool() service.Tool {
	f := false
	return service.NewTool(tool.Binding{
		Name:  "approval_cancel",
		Title: "Withdraw an approval request",
		Description: "Withdraw an approval asked with request_approval or approval_start while it is pending, and tell its state afterwards; " +
			"an operator can no longer answer it. Withdrawing one that has already been decided changes nothing. " +
			"Name the approval with exactly one of approval_id or call_id (the ID of the request_approval or approval_start call in this session that created it).",
		OutputSchema:   jobs.OutputSchema("approval_id"),
		TimeoutSeconds: 30,
		// Withdrawing ends the request (destructive, the MCP default);
		// withdrawing again changes nothing; the queue is the service's own.
		Annotations: &tool.Annotations{IdempotentHint: true, OpenWorldHint: &f},
	}, func(ctx context.Context, call *service.Call, args cancelArgs) (*tool.Result, error) {
		if res := refuseIdentity(call); res != nil {
			return res, nil
		}
		id, res := s.resolve(ctx, call, "approval_cancel", args.ref)
		if res != nil {
			return res, nil
		}
		st, err := backend{s}.Cancel(ctx, jobs.CallOwner(call), id)
		return jobAnswer("cancel", id, st, err, call), nil
	})
}

// resolve returns the approval ID r names. An approval_id is returned as
// given (the backend checks its tenant). A call_id is looked up within the
// calling tenant's session only: a call of another session or tenant is
// not found, with the same words as one that never made an approval.
func (s *Service) resolve(ctx context.Context, call *service.Call, op string, r ref) (string, *tool.Result) {
	if r.ApprovalID != nil {
		return *r.ApprovalID, nil
	}
	a, err := s.store.GetByCall(ctx, call.TenantID, call.SessionID, *r.CallID)
	if errors.Is(err, ErrNotFound) {
		return "", tool.Errorf("%s: no approval was requested by call_id %q in this session "+
			"(call_id must be the ID of a request_approval or approval_start call of this session)", op, *r.CallID)
	}
	if err != nil {
		return "", &tool.Result{Content: []tool.Content{tool.Text(op + ": " + storeFault(call, op+": find approval by call", err) + " while looking up call_id")}, IsError: true}
	}
	return a.ID, nil
}

// jobAnswer renders the status of an approval as approval_status and
// approval_cancel answer it: jobs.StatusJSON as structured_content and
// jobs.StatusText as text, the shapes of pkg/jobs's own job tools.
func jobAnswer(op, id string, st jobs.Status, err error, call *service.Call) *tool.Result {
	if errors.Is(err, jobs.ErrNotFound) {
		return tool.Errorf("approval_%s: approval %s: no approval with this ID for this tenant", op, id)
	}
	if err != nil {
		why := storeFault(call, "approval "+op, err, "approval_id", id)
		return &tool.Result{Content: []tool.Content{tool.Text(fmt.Sprintf("approval_%s of %s: %s", op, id, why))}, IsError: true, UnknownOutcome: op == "cancel"}
	}
	res, err := tool.StructuredResult(jobs.StatusJSON("approval_id", st), jobs.StatusText("approval", st))
	if err != nil {
		return tool.Errorf("approval_%s of %s: %v", op, id, err)
	}
	return res
}
