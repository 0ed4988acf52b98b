package api

import (
	"context"
	"net/http"

	"github.com/uumhq/uum"
)

// getUniqueCounts serves the unique-user counts, all or one event's:
// GET /v1/unique-counts[?event_name=].
func (s *server) getUniqueCounts(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	name := q.Get("event_name")
	if q.Has("event_name") {
		if err := uum.ValidateName("event_name", name); writeInvalid(w, err) {
			return
		}
	}
	counts, err := s.counts.UniqueCounts(r.Context(), name)
	if err != nil {
		s.unavailable(w, r, "count store", err)
		return
	}
	if counts == nil {
		counts = []uum.Count{}
	}
	if name != "" && len(counts) == 0 {
		counts = append(counts, uum.Count{EventName: name}) // asked for it: nobody logged it yet
	}
	writeJSON(w, http.StatusOK, countsBody{Counts: counts})
}

type countsBody struct {
	Counts []uum.Count `json:"counts"`
}

// healthz reports that the process serves HTTP: GET /healthz.
func (s *server) healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// readyz pings every dependency at once, each for at most pingTimeout:
// GET /readyz.
func (s *server) readyz(w http.ResponseWriter, r *http.Request) {
	checks := s.ping(r.Context())
	status, code := "ready", http.StatusOK
	for name, result := range checks {
		if result != "ok" {
			status, code = "unavailable", http.StatusServiceUnavailable
			s.logger.WarnContext(r.Context(), "readiness check failed", "check", name, "error", result)
		}
	}
	writeJSON(w, code, readyBody{Status: status, Checks: checks})
}

type readyBody struct {
	Status string            `json:"status"`
	Checks map[string]string `json:"checks"`
}

// ping returns "ok" or the error text for each dependency. It returns by
// the deadline even if a Pinger ignores its context.
func (s *server) ping(ctx context.Context) map[string]string {
	ctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	type result struct{ name, text string }
	results := make(chan result, len(s.ready)) // buffered: late pingers never block
	for name, p := range s.ready {
		go func() {
			text := "ok"
			if err := p.Ping(ctx); err != nil {
				text = err.Error()
			}
			results <- result{name, text}
		}()
	}
	checks := make(map[string]string, len(s.ready))
	for name := range s.ready {
		checks[name] = "no answer within " + pingTimeout.String()
	}
	for range s.ready {
		select {
		case res := <-results:
			checks[res.name] = res.text
		case <-ctx.Done():
			return checks
		}
	}
	return checks
}
