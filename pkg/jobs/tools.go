package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/brain-tools/suite/pkg/service"
	"github.com/brain-tools/suite/pkg/strictjson"
	"github.com/brain-tools/suite/pkg/tool"
)

// DefaultMaxWait caps a status call's wait_seconds. A status answer is one
// JSON response, so it must come well within the host's 30 s header limit
// (tool.HeaderTimeout).
const DefaultMaxWait = 20 * time.Second

// Spec describes one set of job tools: <Prefix>_start, <Prefix>_status and
// <Prefix>_cancel.
type Spec struct {
	// Prefix names the tools. With "approval" they are approval_start,
	// approval_status and approval_cancel. Required; the resulting names
	// must be valid tool names.
	Prefix string
	// Noun is what one job is called in descriptions and texts ("approval",
	// "command"). Default "job".
	Noun string
	// IDField is the name of the ID in arguments and structured content.
	// Default "job_id".
	IDField string
	// Start is the start tool. Its handler starts the work without waiting
	// for it and answers at once, usually with StartedResult. An empty
	// Binding.Name becomes <Prefix>_start.
	Start service.Tool
	// Backend answers status and cancel calls.
	Backend Backend
	// MaxWait caps wait_seconds of the status tool. Default DefaultMaxWait;
	// at most 25 s, so the answer beats the 30 s header limit.
	MaxWait time.Duration
	// StatusTimeoutSeconds and CancelTimeoutSeconds set the bindings'
	// timeout_seconds. Defaults 60 and 30.
	StatusTimeoutSeconds int
	CancelTimeoutSeconds int
}

func (s *Spec) defaults() error {
	if s.Noun == "" {
		s.Noun = "job"
	}
	if s.IDField == "" {
		s.IDField = "job_id"
	}
	if s.MaxWait <= 0 {
		s.MaxWait = DefaultMaxWait
	}
	if s.StatusTimeoutSeconds == 0 {
		s.StatusTimeoutSeconds = 60
	}
	if s.CancelTimeoutSeconds == 0 {
		s.CancelTimeoutSeconds = 30
	}
	if s.Start.Binding.Name == "" {
		s.Start.Binding.Name = s.Prefix + "_start"
	}
	switch {
	case !tool.ValidName(s.Prefix + "_status"):
		return fmt.Errorf("job tools: prefix %q does not make valid tool names", s.Prefix)
	case s.MaxWait > 25*time.Second:
		return fmt.Errorf("job tools %s: MaxWait %s is over 25s, too close to the 30 s header limit", s.Prefix, s.MaxWait)
	case s.Backend == nil:
		return fmt.Errorf("job tools %s: Backend is nil", s.Prefix)
	case s.Start.Handler == nil:
		return fmt.Errorf("job tools %s: Start.Handler is nil", s.Prefix)
	}
	return nil
}

// Tools returns the start, status and cancel tools of spec, in that order.
// It panics on a Spec that cannot work (an invalid prefix, no Backend, no
// Start handler), which is a programming error found at start-up.
//
// The status tool takes {ID, wait_seconds} and answers StatusJSON as
// structured_content with a readable text; the cancel tool takes {ID} and
// answers the same after cancelling. Both answer is_error for an unknown ID
// or one of another session, with the same words, and authorize by the
// request's tenant_id and session_id (CallOwner). For an ID the Backend did not issue (a
// Manager's *InstanceError: a job of a process before a restart) they
// answer is_error with unknown_outcome and InstanceError.Explain's text.
func Tools(spec Spec) []service.Tool {
	if err := spec.defaults(); err != nil {
		panic(err)
	}
	idSchema := map[string]any{
		"type":        "string",
		"pattern":     IDPattern,
		"description": fmt.Sprintf("The %s ID that %s returned.", spec.Noun, spec.Start.Binding.Name),
	}
	maxWait := int(spec.MaxWait / time.Second)
	statusIn := mustJSON(map[string]any{
		"type": "object",
		"properties": map[string]any{
			spec.IDField: idSchema,
			"wait_seconds": map[string]any{
				"type": "integer", "minimum": 0, "maximum": maxWait,
				"description": fmt.Sprintf("Wait up to this many seconds for the %s to end before answering. Default 0.", spec.Noun),
			},
		},
		"required":             []string{spec.IDField},
		"additionalProperties": false,
	})
	cancelIn := mustJSON(map[string]any{
		"type":                 "object",
		"properties":           map[string]any{spec.IDField: idSchema},
		"required":             []string{spec.IDField},
		"additionalProperties": false,
	})
	out := OutputSchema(spec.IDField)

	status := service.NewTool(tool.Binding{
		Name:  spec.Prefix + "_status",
		Title: capitalize(spec.Noun) + " status",
		Description: fmt.Sprintf("Tell the state of %s started with %s: running, succeeded, failed or cancelled, and its result once it has ended. "+
			"Set wait_seconds to wait for it to end first.", article(spec.Noun), spec.Start.Binding.Name),
		InputSchema:    statusIn,
		OutputSchema:   out,
		TimeoutSeconds: spec.StatusTimeoutSeconds,
		Annotations:    tool.ReadOnly(),
	}, func(ctx context.Context, call *service.Call, args idArgs) (*tool.Result, error) {
		id, wait := args.read(spec.IDField)
		st, err := spec.Backend.Status(ctx, CallOwner(call), id, time.Duration(wait)*time.Second)
		return answer(spec, "status", id, st, err, call), nil
	})
	cancel := service.NewTool(tool.Binding{
		Name:  spec.Prefix + "_cancel",
		Title: "Cancel " + article(spec.Noun),
		Description: fmt.Sprintf("Cancel %s started with %s while it runs, and tell its state afterwards. "+
			"Cancelling %s that has already ended changes nothing.", article(spec.Noun), spec.Start.Binding.Name, article(spec.Noun)),
		InputSchema:    cancelIn,
		OutputSchema:   out,
		TimeoutSeconds: spec.CancelTimeoutSeconds,
		// Cancelling stops the work (destructive, the MCP default) and
		// cancelling again changes nothing; the job is the service's own.
		Annotations: &tool.Annotations{IdempotentHint: true, OpenWorldHint: new(bool)},
	}, func(ctx context.Context, call *service.Call, args idArgs) (*tool.Result, error) {
		id, _ := args.read(spec.IDField)
		st, err := spec.Backend.Cancel(ctx, CallOwner(call), id)
		return answer(spec, "cancel", id, st, err, call), nil
	})
	if m, ok := spec.Backend.(*Manager); ok {
		status.Metrics = m.Observe
	}
	return []service.Tool{spec.Start, status, cancel}
}

// idArgs are the arguments of the status and cancel tools, whose ID
// field is named by Spec.IDField, so their schema is written out (Tools)
// and checked by the runtime before the handler reads them.
type idArgs map[string]json.RawMessage

// read returns the ID and wait_seconds (0 when absent) of arguments the
// schema has accepted.
func (a idArgs) read(idField string) (id string, wait int) {
	_ = json.Unmarshal(a[idField], &id)
	if w, ok := a["wait_seconds"]; ok {
		// strictjson reads integers as JSON Schema does (2.1e1 is 21).
		_ = strictjson.Unmarshal(w, &wait)
	}
	return id, wait
}

func answer(spec Spec, op, id string, st Status, err error, call *service.Call) *tool.Result {
	if errors.Is(err, ErrNotFound) {
		return tool.Errorf("%s %s: no %s with this ID in this session (it may have ended and been forgotten)", spec.Noun, id, spec.Noun)
	}
	var ie *InstanceError
	if errors.As(err, &ie) {
		// A Manager's job of an earlier process: a goroutine, so it ended
		// with that process.
		text := ie.Explain(spec.Noun, "this service", "it was stopped with the service")
		return &tool.Result{Content: []tool.Content{tool.Text(text)}, IsError: true, UnknownOutcome: true}
	}
	if err != nil {
		call.Logger.Error(spec.Noun+" "+op, "err", err, spec.IDField, id)
		return &tool.Result{Content: []tool.Content{tool.Text(fmt.Sprintf("%s %s of %s: internal error", spec.Noun, op, id))}, IsError: true, UnknownOutcome: op == "cancel"}
	}
	res, err := tool.StructuredResult(StatusJSON(spec.IDField, st), StatusText(spec.Noun, st))
	if err != nil {
		return tool.Errorf("%s %s of %s: %v", spec.Noun, op, id, err)
	}
	return res
}

// StatusJSON is the structured_content of status and cancel answers:
//
//	{"<idField>": ID, "state": "running|succeeded|failed|cancelled",
//	 "created_at": RFC 3339, "finished_at": RFC 3339 (once ended),
//	 "result": the job's result object (once ended),
//	 "progress": its latest progress (Report), "partial": its output so
//	 far (ReportPartial, while it runs)}
func StatusJSON(idField string, st Status) map[string]any {
	m := map[string]any{
		idField:      st.ID,
		"state":      st.State,
		"created_at": st.CreatedAt.UTC().Format(time.RFC3339Nano),
	}
	if !st.FinishedAt.IsZero() {
		m["finished_at"] = st.FinishedAt.UTC().Format(time.RFC3339Nano)
	}
	if st.Result != nil {
		m["result"] = st.Result
	}
	if len(st.Progress) > 0 {
		m["progress"] = st.Progress
	}
	if st.Partial != nil && !st.State.Final() {
		m["partial"] = st.Partial
	}
	return m
}

// StatusText renders st for a reader: the state line, then the text blocks
// of the result once the job has ended.
func StatusText(noun string, st Status) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s: %s", noun, st.ID, st.State)
	if st.State == Running {
		fmt.Fprintf(&b, " (started %s)", st.CreatedAt.UTC().Format(time.RFC3339))
		if len(st.Progress) > 0 {
			fmt.Fprintf(&b, "\nprogress: %s", st.Progress)
		}
	} else if !st.FinishedAt.IsZero() {
		fmt.Fprintf(&b, " (ended %s)", st.FinishedAt.UTC().Format(time.RFC3339))
	}
	if st.Result != nil {
		for _, c := range st.Result.Content {
			if c.Type == tool.TypeText && c.Text != "" {
				b.WriteString("\n")
				b.WriteString(c.Text)
			}
		}
	}
	return b.String()
}

// StartedResult is the answer of a start tool: structured_content
// {"<idField>": ID, "state": "running", "created_at": ...} plus extra
// fields, and a text telling the caller how to follow up.
func StartedResult(spec Spec, st Status, extra map[string]any) *tool.Result {
	_ = spec.defaults()
	m := StatusJSON(spec.IDField, st)
	for k, v := range extra {
		m[k] = v
	}
	text := fmt.Sprintf("Started %s %s. Ask %s_status with %s %q for its state and result, or %s_cancel to stop it.",
		spec.Noun, st.ID, spec.Prefix, spec.IDField, st.ID, spec.Prefix)
	res, err := tool.StructuredResult(m, text)
	if err != nil {
		return tool.Errorf("start %s: %v", spec.Noun, err)
	}
	return res
}

// OutputSchema is the JSON Schema of StatusJSON with the given ID field, the
// output_schema of the status and cancel tools.
func OutputSchema(idField string) json.RawMessage {
	return mustJSON(map[string]any{
		"type": "object",
		"properties": map[string]any{
			idField:       map[string]any{"type": "string"},
			"state":       map[string]any{"enum": []State{Running, Succeeded, Failed, Cancelled}},
			"created_at":  map[string]any{"type": "string", "format": "date-time"},
			"finished_at": map[string]any{"type": "string", "format": "date-time"},
			"result":      map[string]any{"type": "object"},
			"progress":    map[string]any{},
			"partial":     map[string]any{"type": "object"},
		},
		"required": []string{idField, "state", "created_at"},
	})
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// capitalize makes the first letter of noun upper-case, for titles.
func capitalize(noun string) string {
	if noun == "" {
		return noun
	}
	return strings.ToUpper(noun[:1]) + noun[1:]
}

// article puts "a" or "an" before noun, for tool descriptions.
func article(noun string) string {
	if noun != "" && strings.ContainsRune("aeiouAEIOU", rune(noun[0])) {
		return "an " + noun
	}
	return "a " + noun
}
