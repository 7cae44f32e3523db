package local

import (
	"github.com/brain-tools/suite/services/sandbox/internal/workspace"
)

// The disk quota (Config.Quota) is checked by walking the workspace
// (workspace.Usage): before each command, every QuotaInterval while it
// runs, and after it ends. A walk costs about 15 µs per file here, so a
// workspace of 50,000 files (a node_modules) takes most of a second. The
// walk after a command is what the next command of the session would
// otherwise repeat before it starts: nothing but the session's commands
// and WriteFile change a workspace, so when neither has run since, that
// measurement still holds and the next command starts without a walk.

// measure walks dir for its disk use (workspace.Usage), counting walks.
func (b *Backend) measure(dir string) (int64, error) {
	b.walks.Add(1)
	return workspace.Usage(dir)
}

// usageState is what the backend knows of one workspace's disk use.
type usageState struct {
	running int    // commands of the workspace running now
	gen     uint64 // bumped by every command start and WriteFile
	used    int64  // the last measurement taken with nothing running
	known   bool   // used still holds: nothing has run or written since
}

func (b *Backend) usageOf(ws *workspace.Workspace) *usageState {
	st := b.usage[ws.ID]
	if st == nil {
		st = &usageState{}
		b.usage[ws.ID] = st
	}
	return st
}

// beginCommand counts a command of ws as running and returns the
// workspace's disk use before it: the last measurement when it still
// holds, a new walk otherwise. Every beginCommand needs its endCommand.
func (b *Backend) beginCommand(ws *workspace.Workspace) (int64, error) {
	b.usageMu.Lock()
	st := b.usageOf(ws)
	used, cached := st.used, st.known && st.running == 0
	st.running++
	st.gen++
	st.known = false
	b.usageMu.Unlock()
	if cached {
		return used, nil
	}
	return b.measure(ws.Dir)
}

// endCommand measures ws once its command has ended, and keeps the
// measurement for the next command when no other command ran or file was
// written meanwhile.
func (b *Backend) endCommand(ws *workspace.Workspace) (int64, error) {
	b.usageMu.Lock()
	gen := b.usageOf(ws).gen
	b.usageMu.Unlock()
	used, err := b.measure(ws.Dir)
	b.usageMu.Lock()
	st := b.usageOf(ws)
	st.running--
	if err == nil && st.running == 0 && st.gen == gen {
		st.used, st.known = used, true
	}
	b.usageMu.Unlock()
	return used, err
}

// wrote forgets ws's last measurement: WriteFile changed the workspace.
func (b *Backend) wrote(ws *workspace.Workspace) {
	b.usageMu.Lock()
	st := b.usageOf(ws)
	st.gen++
	st.known = false
	b.usageMu.Unlock()
}
