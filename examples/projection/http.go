package main

import (
	"net/http"

	"github.com/strom-dev/strom/internal/service"
)

// errorBody is the JSON body of an error answer.
type errorBody struct {
	Error string `json:"error"`
}

// routes are the projection's endpoints, all read-only: GET /users/{id}, /users, /stats,
// /metrics and /health, and the live page of its pipeline under /ui/ when p.page is set
// (web.Pipeline). Any other method is 405 with an Allow header (http.ServeMux's method
// patterns; the page's own).
func (p *projection) routes(metrics http.Handler) *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /users/{id}", p.handleUser)
	mux.HandleFunc("GET /users", p.handleUsers)
	mux.HandleFunc("GET /stats", p.handleStats)
	mux.Handle("GET /metrics", metrics)
	mux.HandleFunc("GET /health", service.Health)
	if p.page != nil {
		mux.Handle("/ui/", http.StripPrefix("/ui", p.page))
	}
	return mux
}

func (p *projection) handleUser(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	u, found, ready := p.user(id)
	switch {
	case !ready:
		service.WriteJSON(w, http.StatusServiceUnavailable, errorBody{Error: "replaying"})
	case !found:
		service.WriteJSON(w, http.StatusNotFound, errorBody{Error: "no events for user " + id})
	default:
		service.WriteJSON(w, http.StatusOK, userCount{User: id, Events: u.Events, Last: u.Last})
	}
}

func (p *projection) handleUsers(w http.ResponseWriter, _ *http.Request) {
	all, ready := p.users()
	if !ready {
		service.WriteJSON(w, http.StatusServiceUnavailable, errorBody{Error: "replaying"})
		return
	}
	service.WriteJSON(w, http.StatusOK, all)
}

func (p *projection) handleStats(w http.ResponseWriter, _ *http.Request) {
	service.WriteJSON(w, http.StatusOK, p.stats())
}
