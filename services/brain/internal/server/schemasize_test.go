package server

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/brain-tools/suite/pkg/httpapi"
	"github.com/brain-tools/suite/pkg/schema"
)

// TestSchemaSizeLimits: a tenant's schema deeper than schema.MaxDepth or
// with more than schema.MaxNodes objects and arrays is refused at once,
// naming the field and the limit (compiled, such a schema cost seconds of
// CPU to minutes: 18 s for a 12 KB one nested 1000 deep), in a session's
// function tool and in a custom tool's input and output schemas.
func TestSchemaSizeLimits(t *testing.T) {
	b := startBrain(t, allowLoopback)
	sess := b.session("t1", "echo")
	deep := json.RawMessage(strings.Repeat(`{"allOf":[`, 1000) + `{}` + strings.Repeat(`]}`, 1000))
	var props []string
	for i := range schema.MaxNodes {
		props = append(props, fmt.Sprintf(`"p%d":{"type":"string"}`, i))
	}
	big := json.RawMessage(`{"type":"object","properties":{` + strings.Join(props, ",") + `}}`)
	// 2 KB, well within both limits, whose every validation would apply
	// 2^32 subschemas: thirty $defs, each an allOf of two $refs to the next.
	defs := map[string]any{"d30": map[string]any{"type": "object"}}
	for i := range 30 {
		ref := map[string]any{"$ref": fmt.Sprintf("#/$defs/d%d", i+1)}
		defs[fmt.Sprintf("d%d", i)] = map[string]any{"allOf": []any{ref, ref}}
	}
	doubling, _ := json.Marshal(map[string]any{"$defs": defs, "$ref": "#/$defs/d0"})
	wantApplied := fmt.Sprintf("checking one value against it would take more than %d steps once its references are followed, the limit", schema.MaxApplied)
	wantDeep := fmt.Sprintf("nests objects and arrays more than %d levels deep, the limit", schema.MaxDepth)
	wantBig := fmt.Sprintf("has more than %d objects and arrays, the limit", schema.MaxNodes)
	custom := func(name string, in, out json.RawMessage) map[string]any {
		m := map[string]any{"name": name, "description": "d", "url": b.tools.URL + "/tools/echo", "input_schema": in}
		if out != nil {
			m["output_schema"] = out
		}
		return m
	}
	tests := []struct {
		name string
		do   func() resp
		want string
	}{
		{"session function, deep", func() resp {
			return b.putTools("t1", sess.ID, []any{map[string]any{"type": "function", "name": "f", "description": "d", "parameters": deep}})
		}, "tools[0].parameters: " + wantDeep},
		{"session function, too many nodes", func() resp {
			return b.putTools("t1", sess.ID, []any{map[string]any{"type": "function", "name": "f", "description": "d", "parameters": big}})
		}, "tools[0].parameters: " + wantBig},
		{"session function, applied along 2^32 paths", func() resp {
			return b.putTools("t1", sess.ID, []any{map[string]any{"type": "function", "name": "f", "description": "d", "parameters": json.RawMessage(doubling)}})
		}, "tools[0].parameters: " + wantApplied},
		{"custom tool input_schema, applied along 2^32 paths", func() resp {
			return b.do("POST", "/custom_tools", "t1", custom("expo", json.RawMessage(doubling), nil))
		}, "input_schema: " + wantApplied},
		{"custom tool input_schema, deep", func() resp { return b.do("POST", "/custom_tools", "t1", custom("deep", deep, nil)) }, "input_schema: " + wantDeep},
		{"custom tool output_schema, too many nodes", func() resp {
			return b.do("POST", "/custom_tools", "t1", custom("big", json.RawMessage(`{"type":"object"}`), big))
		}, "output_schema: " + wantBig},
		{"session function, a million-digit enum value", func() resp {
			return b.putTools("t1", sess.ID, []any{map[string]any{"type": "function", "name": "f", "description": "d",
				"parameters": json.RawMessage(`{"type":"object","properties":{"a":{"enum":[1,1e999999]}}}`)}})
		}, "tools[0].parameters: at /properties/a/enum/1: number 1e999999 has an exponent beyond ±400"},
		{"custom tool input_schema, a million-digit maximum", func() resp {
			return b.do("POST", "/custom_tools", "t1", custom("num", json.RawMessage(`{"type":"object","properties":{"a":{"maximum":1e-999999}}}`), nil))
		}, "input_schema: at /properties/a/maximum: number 1e-999999 has an exponent beyond ±400"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantRefusal(t, tt.do(), 400, httpapi.CodeInvalidRequest, tt.want)
		})
	}
}
