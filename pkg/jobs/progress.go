package jobs

import (
	"context"
	"encoding/json"

	"github.com/brain-tools/suite/pkg/tool"
)

// reporterKey is the context key under which a Manager's job finds itself.
type reporterKey struct{}

type reporter struct {
	m *Manager
	j *job
}

// Report records progress as the running job's latest progress, which the
// status tool shows until the job ends: v is any JSON value
// (service.Progress for structured progress, {"progress":3,"total":10,
// "message":"…"}). ctx is the context the Manager gave the job's Func (or
// one derived from it); anywhere else, and once the job has ended, Report
// does nothing and returns nil. The error is v's encoding failure.
func Report(ctx context.Context, v any) error {
	r, ok := ctx.Value(reporterKey{}).(reporter)
	if !ok {
		return nil
	}
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	r.m.mu.Lock()
	defer r.m.mu.Unlock()
	if !r.j.status.State.Final() {
		r.j.status.Progress = data
	}
	return nil
}

// ReportPartial records partial, the output so far of the running job,
// which the status tool shows until the job ends (then its result). The
// job must not change partial afterwards: report a new one instead. As
// Report, it does nothing outside a Manager's job or once the job ended.
func ReportPartial(ctx context.Context, partial *tool.Result) {
	r, ok := ctx.Value(reporterKey{}).(reporter)
	if !ok {
		return
	}
	r.m.mu.Lock()
	defer r.m.mu.Unlock()
	if !r.j.status.State.Final() {
		r.j.status.Partial = partial
	}
}
