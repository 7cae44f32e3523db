package jobs

import (
	"context"
	"errors"

	"github.com/brain-tools/suite/pkg/service"
	"github.com/brain-tools/suite/pkg/tool"
)

// TypedStart returns a start tool declared with service.NewTool: its
// input_schema is inferred from In unless b sets one, the arguments are
// checked against it on every transport and decoded into In, and prepare
// checks the call (its tenant's rights, what a schema cannot say) and
// returns the work to run on m, owned by the call's tenant and session
// (CallOwner); an error is
// answered as an is_error result instead. The answer is StartedResult. An
// empty b.Name becomes <spec.Prefix>_start.
func TypedStart[In any](m *Manager, spec Spec, b tool.Binding, prepare func(ctx context.Context, call *service.Call, in In) (Func, error)) service.Tool {
	_ = spec.defaults() // Noun and IDField; Tools reports what is missing
	if b.Name == "" {
		b.Name = spec.Prefix + "_start"
	}
	return service.NewTool(b, func(ctx context.Context, call *service.Call, in In) (*tool.Result, error) {
		fn, err := prepare(ctx, call, in)
		if err != nil {
			return nil, err
		}
		if fn == nil {
			return tool.Errorf("start %s: nothing to run", spec.Noun), nil
		}
		st, err := m.Start(CallOwner(call), fn)
		if err != nil {
			return nil, err
		}
		return StartedResult(spec, st, nil), nil
	})
}

// Typed returns the start, status and cancel tools (Tools) of jobs that
// run fn on m: <spec.Prefix>_start takes fn's arguments (In, checked as
// NewTool does), starts fn as a job of the call's tenant and session and answers its
// ID at once; fn's result (its output, as service.Output makes it, or its
// error as an is_error result) is the job's result. What fn reports with
// call.Progress is the job's progress (Report), which
// <spec.Prefix>_status shows while it runs. So one TypedHandler serves
// both as a tool that streams its progress and as a job. spec.Backend
// defaults to m; b is the start tool's binding.
func Typed[In, Out any](m *Manager, spec Spec, b tool.Binding, fn service.TypedHandler[In, Out]) []service.Tool {
	if spec.Backend == nil {
		spec.Backend = m
	}
	spec.Start = TypedStart(m, spec, b, func(_ context.Context, call *service.Call, in In) (Func, error) {
		return func(ctx context.Context) *tool.Result {
			jc := service.NewCall(call.Request, call.Logger, func(v any) error { return Report(ctx, v) })
			out, err := fn(ctx, jc, in)
			if err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
				return tool.Errorf("cancelled before it finished")
			}
			return service.Answer(out, err)
		}, nil
	})
	return Tools(spec)
}
