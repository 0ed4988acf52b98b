package api

import (
	"context"
	"net/http"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/uniqueevents"
)

// getUniqueCounts serves the unique-user counts, all or one event's:
// GET /v1/unique-counts[?event_name=].
func (s *server) getUniqueCounts(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	name := q.Get("event_name")
	if q.Has("event_name") {
		// Only a name that could be counted: with an allow-list, a typo
		// is a 400 here as everywhere else, not a plausible 0.
		if err := s.events.Loggable(name); writeInvalid(w, err) {
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
		writeUnknownEvent(w, &uniqueevents.UnknownEventError{Name: name}) // never counted: not a confident 0
		return
	}
	writeJSON(w, http.StatusOK, countsBody{Counts: counts})
}

type countsBody struct {
	Counts []uum.Count `json:"counts"`
}

// routeSeries is the route of an event's series.
const routeSeries = "GET /v1/unique-counts/{event_name}/series"

// getUniqueSeries serves an event's new unique users per period:
// GET /v1/unique-counts/{event_name}/series?period=&from=&to=&tz=, the
// uniqueevents.Series as it is.
func (s *server) getUniqueSeries(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	series, err := s.events.UniqueSeries(r.Context(), r.PathValue("event_name"), uniqueevents.SeriesQuery{
		Period: q.Get("period"), From: q.Get("from"), To: q.Get("to"), TZ: q.Get("tz"),
	})
	if writeInvalid(w, err) || writeUnknownEvent(w, err) {
		return
	}
	if err != nil {
		s.unavailable(w, r, "count store", err)
		return
	}
	writeJSON(w, http.StatusOK, series)
}

// healthz reports that the process serves HTTP: GET /healthz.
func (s *server) healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// readyz pings every dependency at once, each for at most pingTimeout:
// GET /readyz. It answers only "ok" or "unavailable": it needs no token,
// so the failures, which name internal addresses, go to the log, once
// when a check starts failing and once when it recovers.
func (s *server) readyz(w http.ResponseWriter, r *http.Request) {
	failed := s.ping(r.Context())
	s.noteReadiness(r.Context(), failed)
	if len(failed) > 0 {
		writeJSON(w, http.StatusServiceUnavailable, readyBody{Status: "unavailable"})
		return
	}
	writeJSON(w, http.StatusOK, readyBody{Status: "ok"})
}

type readyBody struct {
	Status string `json:"status"`
}

// noteReadiness logs the checks whose state changed since the last probe.
func (s *server) noteReadiness(ctx context.Context, failed map[string]string) {
	s.readyMu.Lock()
	defer s.readyMu.Unlock()
	for name := range s.ready {
		text, bad := failed[name]
		_, wasBad := s.failing[name]
		switch {
		case bad && !wasBad:
			s.logger.WarnContext(ctx, "readiness check failed", "check", name, "error", text, "request_id", requestIDOf(ctx))
		case !bad && wasBad:
			s.logger.InfoContext(ctx, "readiness check ok again", "check", name)
		}
	}
	s.failing = failed
}

// ping returns the error text of each dependency that failed, by name. It
// returns by the deadline even if a Pinger ignores its context.
func (s *server) ping(ctx context.Context) map[string]string {
	ctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	type result struct {
		name string
		err  error
	}
	results := make(chan result, len(s.ready)) // buffered: late pingers never block
	for name, p := range s.ready {
		go func() { results <- result{name, p.Ping(ctx)} }()
	}
	failed := make(map[string]string)
	for name := range s.ready {
		failed[name] = "no answer within " + pingTimeout.String()
	}
	for range s.ready {
		select {
		case res := <-results:
			if res.err == nil {
				delete(failed, res.name)
			} else {
				failed[res.name] = res.err.Error()
			}
		case <-ctx.Done():
			return failed
		}
	}
	return failed
}
