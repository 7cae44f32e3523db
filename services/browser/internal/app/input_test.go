package app

import (
	"context"
	"strconv"
	"strings"
	"testing"
)

// TestArgumentsNameTheField: every refusal names the argument at fault,
// before a browser is involved.
func TestArgumentsNameTheField(t *testing.T) {
	n := func(v int) *int { return &v }
	tests := []struct {
		name string
		v    interface{ Validate() error }
		want string
	}{
		{"open without url or page", &OpenArgs{}, "url: required"},
		{"open file:", &OpenArgs{URL: "file:///etc/passwd"}, "url: must be an absolute http:// or https:// URL"},
		{"open chrome:", &OpenArgs{URL: "chrome://settings"}, "url: must be an absolute http"},
		{"open javascript:", &OpenArgs{URL: "javascript:alert(1)"}, "url: must be an absolute http"},
		{"open long url", &OpenArgs{URL: "http://a.example/" + strings.Repeat("a", MaxURLLength)}, "url: longer than 8192 bytes"},
		{"open bad selector", &OpenArgs{URL: "http://a.example/", WaitFor: "a[["}, "wait_for: not a valid CSS selector"},
		{"open max_length 0", &OpenArgs{URL: "http://a.example/", ReadArgs: ReadArgs{MaxLength: n(0)}}, "max_length: must be from 1 to 100000"},
		{"open negative start", &OpenArgs{PageID: "p1", StartIndex: n(-1)}, "start_index: must be 0 or more"},
		{"open format", &OpenArgs{URL: "http://a.example/", ReadArgs: ReadArgs{Format: "pdf"}}, "format: must be markdown, text or html"},
		{"act no page", &ActArgs{Actions: []Step{{Action: "click", Selector: "a"}}}, "page_id: required"},
		{"act no steps", &ActArgs{PageID: "p1"}, "actions: required"},
		{"act too many", &ActArgs{PageID: "p1", Actions: make([]Step, MaxActions+1)}, "actions: at most 20 steps"},
		{"act unknown", &ActArgs{PageID: "p1", Actions: []Step{{Action: "hover"}}}, "actions[0].action: must be click"},
		{"act click no selector", &ActArgs{PageID: "p1", Actions: []Step{{Action: "back"}, {Action: "click"}}}, "actions[1].selector: required for click"},
		{"act select no value", &ActArgs{PageID: "p1", Actions: []Step{{Action: "select", Selector: "#s"}}}, "actions[0].value: required for select"},
		{"act key", &ActArgs{PageID: "p1", Actions: []Step{{Action: "press", Key: "Hyper"}}}, "actions[0].key: must be one character or one of Enter"},
		{"act navigate file", &ActArgs{PageID: "p1", Actions: []Step{{Action: "navigate", URL: "file:///"}}}, "actions[0].url: must be an absolute http"},
		{"act wait nothing", &ActArgs{PageID: "p1", Actions: []Step{{Action: "wait"}}}, "actions[0].selector: wait needs a selector or a text"},
		{"act scroll far", &ActArgs{PageID: "p1", Actions: []Step{{Action: "scroll", Pixels: n(MaxScroll + 1)}}}, "actions[0].pixels: must be from -100000 to 100000"},
		{"shot width", &ShotArgs{PageID: "p1", Width: n(99)}, "width: must be from 100 to 3840"},
		{"shot height", &ShotArgs{PageID: "p1", Height: n(3841)}, "height: must be from 100 to 3840"},
		{"pages action", &PagesArgs{Action: "kill"}, "action: must be list, close or close_all"},
		{"pages close without id", &PagesArgs{Action: "close"}, "page_id: required for close"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.v.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate() = %v, want an error containing %q", err, tc.want)
			}
		})
	}
	for _, ok := range []interface{ Validate() error }{
		&OpenArgs{URL: "https://a.example/x?q=1"}, &OpenArgs{PageID: "p1", StartIndex: n(10)},
		&ActArgs{PageID: "p1", Actions: []Step{{Action: "press", Key: "Enter"}, {Action: "press", Key: "a"}, {Action: "wait", Text: "done"}}},
		&ShotArgs{PageID: "p1", FullPage: true}, &PagesArgs{},
	} {
		if err := ok.Validate(); err != nil {
			t.Errorf("%+v: %v", ok, err)
		}
	}
}

// TestConfigNamesTheVariable: each bad setting is refused at start with
// its variable named.
func TestConfigNamesTheVariable(t *testing.T) {
	tests := map[string]string{
		"BROWSER_ALLOW":          "not a host!",
		"BROWSER_PORTS":          "0",
		"BROWSER_VIEWPORT":       "1280",
		"BROWSER_MAX_SESSIONS":   "0",
		"BROWSER_MAX_PAGES":      "101",
		"BROWSER_IDLE_TIMEOUT":   "10ms",
		"BROWSER_LOAD_TIMEOUT":   "0s",
		"BROWSER_MAX_HTML_BYTES": "10",
		"BROWSER_MAX_PAGE_BYTES": "-1",
	}
	for name, val := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := ParseConfig(map[string]string{"INSECURE_NO_AUTH": "true", name: val})
			if err == nil || !strings.Contains(err.Error(), name) {
				t.Fatalf("%s=%s: %v", name, val, err)
			}
		})
	}
	cfg, err := ParseConfig(map[string]string{"BRAIN_TOOLS_KEY": "0123456789abcdef0123"})
	if err != nil || cfg.Addr != DefaultAddr {
		t.Fatalf("defaults: %+v %v", cfg, err)
	}
}

// TestRefusedBeforeAnythingOpens: a destination the guard refuses is an
// is_error result naming the reason, and no session or page is made.
func TestRefusedBeforeAnythingOpens(t *testing.T) {
	h := newHarness(t, nil)
	p := ":" + strconv.Itoa(h.port)
	tests := map[string]string{
		"http://127.0.0.1" + p + "/":                        "loopback",
		"http://[::1]" + p + "/":                            "loopback",
		"http://169.254.169.254" + p + "/latest/meta-data/": "link-local",
		"http://0x7f.1" + p + "/":                           "127.0.0.1",
		"http://0.0.0.0" + p + "/":                          "this network",
		"http://localhost" + p + "/":                        "loopback name",
		"http://loopback.test" + p + "/":                    "resolves to 127.0.0.1",
		"http://" + pageHost + ":22/":                       "port 22 is not allowed",
	}
	for u, why := range tests {
		r, err := h.call(context.Background(), "s1", OpenName, map[string]any{"url": u})
		if err != nil || !r.IsError || !strings.Contains(text(r), "refused") || !strings.Contains(text(r), why) {
			t.Errorf("%s: %v %s", u, err, text(r))
		}
	}
	if n := h.svc.Manager.Count(); n != 0 {
		t.Errorf("%d sessions made for refused URLs", n)
	}
}
