package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestSimultaneousAnswersOnPageAndAPI: the operator approves a gated call's
// approval on the page at the moment the application denies the gated
// call through brain's API, round after round. In brain the first answer
// wins; when the API's does, brain withdraws the approval, and local
// either cancels it (the withdrawal came first) or, when the operator's
// decision got there first, keeps it and marks it not used. No round may
// leave local showing "approved by alice" unmarked while brain went with
// the API's denial, nor mark a decision brain used. Each marked round is
// one WARN in local and one in brain.
func TestSimultaneousAnswersOnPageAndAPI(t *testing.T) {
	const rounds = 20
	l := startLocal(t, map[string]string{"APPROVAL_REATTACH_GRACE": "1m"})
	cnt := newCounter(t)
	b := startBrainWith(t, l, withCancelTool(withWaitingTools(cnt, 300, false)))
	o := signIn(t, l.url, "alice")
	sess := b.session("restart_db")
	evs := b.events(sess)

	statusRE := regexp.MustCompile(`id="status">([a-z]+)<`)
	var operatorWon, cancelled, notUsed int
	for round := range rounds {
		c := b.call(sess, "restart_db", map[string]any{"db": fmt.Sprint("orders-", round)}, 0)
		p := progressOf(t, next(t, evs, "tool.progress", 10*time.Second))

		// Both answers at once, or nearly; which goes first is left to
		// the race.
		var wg sync.WaitGroup
		start := make(chan struct{})
		var pageCode, apiCode int
		var pageErr, apiErr error
		wg.Add(2)
		go func() {
			defer wg.Done()
			<-start
			pageCode, pageErr = o.tryDecide(p.ApprovalID, "approve", "")
		}()
		go func() {
			defer wg.Done()
			<-start
			// From at once to 8 ms after the operator, so that either
			// answer wins some rounds.
			time.Sleep(time.Duration(round%5) * 2 * time.Millisecond)
			apiCode, apiErr = respondRaw(b, c.ID, `{"approved":false,"comment":"the application answered"}`)
		}()
		close(start)
		wg.Wait()
		if pageErr != nil || apiErr != nil {
			t.Fatalf("round %d: page %v, API %v", round, pageErr, apiErr)
		}

		gated := b.getCall(c.ID, 10)
		responder := responderOf(t, evs, c.ID)
		eventually(t, 10*time.Second, "the approval call ended", func() bool {
			ac := b.approvalCalls(sess, c.ID)
			return len(ac) == 1 && ac[0].Status != "running"
		})
		// When the operator's decision ended the approval call before
		// brain took the API's answer, the approval call is over before
		// the withdrawal is: then local's record changes once the
		// withdrawal lands, and only a state that outlasts it counts.
		var page, status string
		var marked bool
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			page = o.get("/approval/" + p.ApprovalID)
			m := statusRE.FindStringSubmatch(page)
			if m == nil {
				t.Fatalf("round %d: no status on the approval's page", round)
			}
			status, marked = m[1], strings.Contains(page, `id="not-used"`)
			if responder != "api" || status != "approved" || marked || time.Now().After(deadline) {
				break
			}
		}
		what := fmt.Sprintf("round %d: page answered %d, API %d; brain: gated call %s, responder %s; local: %s, not-used mark %v",
			round, pageCode, apiCode, gated.Status, responder, status, marked)
		switch {
		case responder == "operator":
			operatorWon++
			if gated.Status != "succeeded" || status != "approved" || marked {
				t.Errorf("%s: want the operator's approval used, unmarked", what)
			}
		case responder == "api" && status == "cancelled":
			cancelled++
			if gated.Status != "failed" {
				t.Errorf("%s: want the API's denial", what)
			}
		case responder == "api" && status == "approved" && marked:
			notUsed++
			if gated.Status != "failed" || !strings.Contains(page, "This decision was not used.") {
				t.Errorf("%s: want the API's denial, and the page to say the approval was not used", what)
			}
		default:
			t.Errorf("%s: local's record does not say what brain did", what)
		}
	}
	t.Logf("%d rounds: operator's answer won %d, API's won with the approval withdrawn %d, API's won after the operator's approval (marked not used) %d",
		rounds, operatorWon, cancelled, notUsed)

	localWarns := len(readLines(l.p.Output(), "the decision was not used"))
	eventually(t, 5*time.Second, "brain logged each decided withdrawal", func() bool {
		return len(readLines(b.p.Output(), "already ended (decided or expired) when brain withdrew it")) == notUsed
	})
	if localWarns != notUsed {
		t.Errorf("local logged %d WARNs of a decision not used, want %d (one per marked round)", localWarns, notUsed)
	}
	if n := len(readLines(b.p.Output(), "withdrew the approval of an approval call")); n != cancelled {
		t.Errorf("brain logged %d withdrawals as done, want %d (the rounds local cancelled)", n, cancelled)
	}
}

// respondRaw answers gated call id through brain's API with body, from
// any goroutine: the status, whatever it is (the loser of a race gets
// 409).
func respondRaw(b *brain, id, body string) (int, error) {
	req, _ := http.NewRequest(http.MethodPost, b.url+"/tool_calls/"+id+"/respond", bytes.NewReader([]byte(body)))
	req.Header.Set("Authorization", "Bearer "+brainKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// responderOf returns the responder type of gated call id's
// tool.responded event ("operator", "api").
func responderOf(t *testing.T, evs <-chan event, id string) string {
	t.Helper()
	for {
		e := next(t, evs, "tool.responded", 10*time.Second)
		if e.CallID != id {
			continue
		}
		var d struct {
			Responder struct {
				Type string `json:"type"`
			} `json:"responder"`
		}
		if err := json.Unmarshal(e.Data, &d); err != nil {
			t.Fatalf("tool.responded %s: %v", e.Data, err)
		}
		return d.Responder.Type
	}
}
