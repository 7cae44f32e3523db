package app

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/brain-tools/suite/pkg/extract"
	"github.com/brain-tools/suite/pkg/httpapi"
	"github.com/brain-tools/suite/pkg/metrics"
	"github.com/brain-tools/suite/pkg/netguard"
	"github.com/brain-tools/suite/pkg/service"
	"github.com/brain-tools/suite/pkg/strictjson"
	"github.com/brain-tools/suite/services/browser/internal/chrome"
	"github.com/brain-tools/suite/services/browser/internal/egress"
	"github.com/brain-tools/suite/services/browser/internal/session"
)

// Service is the running browser service: its sessions and its server.
type Service struct {
	Server  *service.Server
	Manager *session.Manager
	proxy   *egress.Proxy
	tools   *Tools
}

// Close ends every session and stops Chromium.
func (s *Service) Close() {
	s.Manager.Close()
	s.proxy.Close()
}

// New builds the service from a checked Config. Chromium starts with the
// first call (Start starts it at once).
func New(cfg Config, deps Deps, logger *slog.Logger) (*Service, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	g, err := cfg.guard(deps)
	if err != nil {
		return nil, err
	}
	path, err := chrome.ExecPath(cfg.Chromium)
	if err != nil {
		return nil, fmt.Errorf("BROWSER_CHROMIUM: %w", err)
	}
	w, h, err := parseViewport(cfg.Viewport)
	if err != nil {
		return nil, fmt.Errorf("BROWSER_VIEWPORT: %w", err)
	}
	proxy := egress.New(g, logger)
	m := session.New(session.Options{
		Chrome:      chrome.Options{ExecPath: path, HeapMB: cfg.JSHeapMB, Width: w, Height: h},
		MaxSessions: cfg.MaxSessions,
		MaxPages:    cfg.MaxPages,
		IdleTimeout: cfg.IdleTimeout,
		PageBytes:   cfg.MaxPageBytes,
		MaxMemory:   cfg.MaxMemoryMB << 20,
		Logger:      logger,
	}, proxy)
	// A page is read once it loaded and its network was quiet for
	// quietPeriod (or the settle limit passed): requests its scripts start
	// at load keep it waiting; Chromium's own networkIdle would wait 500 ms.
	const quietPeriod = 150 * time.Millisecond
	t := &Tools{cfg: cfg, m: m, guard: g, ex: extract.New(), w: w, h: h, maxElems: 60,
		wait: chrome.Wait{Load: cfg.LoadTimeout, Settle: cfg.SettleTimeout, Quiet: quietPeriod}}
	svc := &Service{Manager: m, proxy: proxy, tools: t}
	srv := &service.Server{
		Name:   "browser",
		Config: cfg.Config,
		Logger: logger,
		Tools:  t.list(),
		Health: func(ctx context.Context) (map[string]any, error) {
			d := map[string]any{"sessions": m.Count()}
			if b := m.Browser(); b != nil {
				d["chromium_pid"] = b.PID()
			}
			return d, nil
		},
		Routes: func(r *httprouter.Router) {
			r.POST("/render", func(w http.ResponseWriter, req *http.Request, _ httprouter.Params) {
				svc.Server.Authed(httpapi.Responder{Logger: logger}.Handle(svc.serveRender))(w, req)
			})
		},
	}
	srv.Metrics().GaugeFunc(metrics.BrowserSessions, func() float64 { return float64(m.Count()) })
	srv.Metrics().GaugeFunc(metrics.BrowserMemoryPeak, func() float64 { return float64(m.Peak()) })
	svc.Server = srv
	return svc, nil
}

// Run is the service's whole life (service.RunFunc).
func Run(ctx context.Context, environ map[string]string, logger *slog.Logger) error {
	cfg, err := ParseConfig(environ)
	if err != nil {
		return err
	}
	svc, err := New(cfg, Deps{}, logger)
	if err != nil {
		return err
	}
	defer svc.Close()
	if err := svc.Manager.Start(ctx); err != nil {
		return err
	}
	logger.Info("browser policy", "allow", cfg.Allow, "ports", cfg.Ports, "max_sessions", cfg.MaxSessions, "max_pages", cfg.MaxPages)
	return service.Run(ctx, svc.Server)
}

// RenderRequest is the body of POST /render: a page to render for another
// service (the web fetcher's render option).
type RenderRequest struct {
	// URL is the http(s) page to render.
	URL string `json:"url"`
	// WaitFor is a CSS selector to wait for before reading (optional).
	WaitFor string `json:"wait_for,omitempty"`
}

// RenderResponse is the answer of POST /render: the rendered DOM,
// serialized, as Chromium holds it after the page's scripts ran.
type RenderResponse struct {
	URL      string   `json:"url"`
	FinalURL string   `json:"final_url"`
	Status   int      `json:"status"`
	Title    string   `json:"title"`
	HTML     string   `json:"html"`
	Loading  bool     `json:"loading,omitempty"`
	Cut      bool     `json:"cut,omitempty"`
	Blocked  []string `json:"blocked,omitempty"`
}

// serveRender renders one page in a browser context of its own, made for
// the request and disposed of after it. Errors: 400 bad body, 403 a URL
// the guard refuses, 502 a navigation that failed, 503 at the session
// limit.
func (s *Service) serveRender(w http.ResponseWriter, r *http.Request) error {
	var req RenderRequest
	if err := strictjson.Decode(r.Body, 64<<10, &req); err != nil {
		return httpapi.BodyError(err)
	}
	if err := checkURL("url", req.URL); err != nil {
		return httpapi.BadRequest("%v", err)
	}
	if err := checkSelector("wait_for", req.WaitFor); err != nil {
		return httpapi.BadRequest("%v", err)
	}
	ctx, cancel := context.WithTimeout(r.Context(), renderTimeout)
	defer cancel()
	resp, status, err := s.render(ctx, req)
	if err != nil {
		code := "render_failed"
		if status == http.StatusForbidden {
			code = "refused"
		}
		return httpapi.Errorf(status, code, "render %s: %v", req.URL, err)
	}
	httpapi.WriteJSON(w, http.StatusOK, resp)
	return nil
}

func (s *Service) render(ctx context.Context, req RenderRequest) (*RenderResponse, int, error) {
	t := s.tools
	if err := t.checkDestination(ctx, req.URL); err != nil {
		if errors.Is(err, netguard.ErrRefused) {
			return nil, http.StatusForbidden, err
		}
		return nil, http.StatusBadGateway, err
	}
	var id [8]byte
	_, _ = rand.Read(id[:])
	sess, err := t.m.Acquire(ctx, session.Key{Tenant: "\x00render", Session: hex.EncodeToString(id[:])})
	if err != nil {
		return nil, http.StatusServiceUnavailable, err
	}
	defer sess.Release()
	defer sess.End()
	p, err := sess.NewPage(ctx, t.w, t.h)
	if err != nil {
		return nil, http.StatusServiceUnavailable, err
	}
	load, err := p.Page.Navigate(ctx, req.URL, t.wait)
	if err == nil && req.WaitFor != "" {
		load, err = p.Page.Act(ctx, chrome.Action{Kind: "wait", Selector: req.WaitFor}, t.cfg.ActionTimeout, t.wait)
	}
	if err != nil {
		if r := sess.Egress.Refusals(); len(r) > 0 {
			err = fmt.Errorf("%w (refused by the SSRF guard: %v)", err, r)
		}
		return nil, http.StatusBadGateway, err
	}
	html, cut, err := p.Page.HTML(ctx, t.cfg.MaxHTMLBytes)
	if err != nil {
		return nil, http.StatusBadGateway, err
	}
	return &RenderResponse{URL: req.URL, FinalURL: load.URL, Status: load.Status, Title: load.Title, HTML: html,
		Loading: load.Loading, Cut: cut, Blocked: sess.Egress.Refusals()}, http.StatusOK, nil
}
