package dashboard

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/web"
)

// listConsumers is GET /consumers, a tenant's page: its consumers, each
// leading to the consumer's view.
func (d *Dashboard) listConsumers(w http.ResponseWriter, r *http.Request) error {
	p, err := pageParams(r)
	if err != nil {
		return err
	}
	page, err := d.store.ListConsumers(r.Context(), tenantID(r), p)
	if err != nil {
		return err
	}
	v := web.ConsumersView{Consumers: page.Items, Older: olderURL(r, page.Next)}
	return d.render(w, r, http.StatusOK, web.ConsumersPage(chrome(r, web.SectionConsumers), v))
}

// showConsumer is GET /consumers/{uid}, a tenant's page: one consumer and
// its endpoints, which lead to the same endpoint pages its portal shows.
func (d *Dashboard) showConsumer(w http.ResponseWriter, r *http.Request) error {
	uid := chi.URLParam(r, "uid")
	if !sluice.ValidConsumerUID(uid) {
		return errNotFound()
	}
	p, err := pageParams(r)
	if err != nil {
		return err
	}
	c, err := d.store.GetConsumer(r.Context(), tenantID(r), uid)
	if err != nil {
		return err
	}
	page, err := d.store.ListEndpoints(r.Context(), tenantID(r), &uid, p)
	if err != nil {
		return err
	}
	v := web.ConsumerView{Consumer: c, Endpoints: page.Items, Older: olderURL(r, page.Next)}
	return d.render(w, r, http.StatusOK, web.ConsumerPage(chrome(r, web.SectionConsumers), v))
}
