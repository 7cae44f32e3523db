package tool_test

import (
	"fmt"

	"github.com/brain-tools/suite/pkg/tool"
)

// A host reads a tool's answer strictly: content blocks by type, and
// errors that name the field at fault.
func ExampleDecodeResult() {
	r, err := tool.DecodeResult([]byte(`{"content":[{"type":"text","text":"3 words"}],"structured_content":{"words":3}}`))
	fmt.Println(r.Content[0].Text, string(r.StructuredContent), err)

	_, err = tool.DecodeResult([]byte(`{"content":[{"type":"video","url":"x"}]}`))
	fmt.Println(err)
	// Output:
	// 3 words {"words":3} <nil>
	// result: content[0].type: unknown content type "video" (want text or image)
}

// A binding names every field the contract's table has; Validate names
// the first one at fault.
func ExampleBinding_Validate() {
	b := tool.Binding{
		Name:        "word_count",
		Description: "Count the words of a text.",
		InputSchema: []byte(`{"type":"object"}`),
		URL:         "http://127.0.0.1:8099/tools/word_count",
		Tenants:     []string{"local"},
	}
	fmt.Println(b.Validate())
	b.TimeoutSeconds = 90000
	fmt.Println(b.Validate())
	// Output:
	// <nil>
	// timeout_seconds: must be from 1 to 86400, got 90000
}

// AppendJSON writes a result as the contract's JSON, without HTML
// escaping.
func ExampleResult_AppendJSON() {
	r := tool.Errorf("fetch <http://x.test/>: 404 & gone")
	b, _ := r.AppendJSON(nil)
	fmt.Println(string(b))
	// Output:
	// {"content":[{"type":"text","text":"fetch <http://x.test/>: 404 & gone"}],"is_error":true}
}
