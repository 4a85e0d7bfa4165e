package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/apirate"
	"github.com/sluice-dev/sluice/internal/dispatch"
	"github.com/sluice-dev/sluice/internal/httpapi"
	"github.com/sluice-dev/sluice/internal/ingest"
	"github.com/sluice-dev/sluice/internal/jobs"
	"github.com/sluice-dev/sluice/internal/jobs/jobstest"
	"github.com/sluice-dev/sluice/internal/poll"
	"github.com/sluice-dev/sluice/internal/send"
	"github.com/sluice-dev/sluice/internal/testkit/controltest"
	"github.com/sluice-dev/sluice/internal/testkit/storetest"
)

// pollBundle is a testBundle whose ingest nudges through a Nudger that
// the API's waiting poll requests join, as the app wires them: started,
// so that it listens for wakes and stamps poll endpoints.
type pollBundle struct {
	*testBundle
	api    *httpapi.API
	nudger *dispatch.Nudger
}

func setupPoll(t *testing.T) *pollBundle {
	t.Helper()
	return setupPollWith(t, apirate.Config{Tenant: testRate})
}

// setupPollWith is setupPoll with the API's limits configured by limits
// (their Rates: the store).
func setupPollWith(t *testing.T, limits apirate.Config) *pollBundle {
	t.Helper()
	t.Parallel()
	f := storetest.New(t)
	st := f.Store
	limits.Rates = st
	b := &testBundle{t: t, store: st, jobs: f.Jobs, tenantA: f.TenantA, keyA: f.KeyA, tenantB: f.TenantB, keyB: f.KeyB}
	nudger := dispatch.NewNudger(st, f.Jobs, dispatch.NudgerConfig{ConnConfig: st.Pool().Config().ConnConfig})
	require.NoError(t, nudger.Start(context.Background()))
	t.Cleanup(nudger.Stop)
	b.nudger = nudger
	require.Eventually(t, func() bool { _, ok := nudger.PollStamp(uuid.Nil); return ok }, 10*time.Second, time.Millisecond,
		"the Nudger's listener never listened")
	in, err := ingest.New(st, ingest.Config{Nudger: nudger})
	require.NoError(t, err)
	require.NoError(t, in.Start(context.Background()))
	t.Cleanup(in.Stop)
	api := httpapi.New(controltest.New(st, controltest.Options{AllowPrivateTargets: true, Nudger: nudger, PublicURL: "http://sluice.test"}), httpapi.Config{Ingest: in, Limits: apirate.New(limits)})
	b.handler = api.Handler()
	b.srv = httptest.NewServer(b.handler)
	t.Cleanup(b.srv.Close)
	return &pollBundle{testBundle: b, api: api, nudger: nudger}
}

// pollEndpoint creates a poll endpoint subscribed to every event and
// returns its id and the path of its poll URL.
func (b *pollBundle) pollEndpoint() (id, path string) {
	b.t.Helper()
	ep := b.createEndpoint(b.keyA, map[string]any{"delivery": "poll"})
	require.Equal(b.t, "poll", ep["delivery"])
	require.NotContains(b.t, ep, "url")
	u, err := url.Parse(ep["poll_url"].(string))
	require.NoError(b.t, err)
	require.Equal(b.t, "sluice.test", u.Host)
	b.subscribe(b.keyA, ep["id"].(string), nil, "*")
	return ep["id"].(string), u.Path
}

// post posts an event and returns its id.
func (b *pollBundle) post(n int) string {
	b.t.Helper()
	r := b.do(b.keyA, http.MethodPost, "/v1/events", map[string]any{"type": "order.created", "payload": map[string]any{"n": n}})
	require.Equal(b.t, http.StatusAccepted, r.Status, string(r.Body))
	return r.JSON(b.t)["id"].(string)
}

type pollPage struct {
	Data []struct {
		ID        string          `json:"id"`
		Type      string          `json:"type"`
		Timestamp time.Time       `json:"timestamp"`
		Data      json.RawMessage `json:"data"`
	} `json:"data"`
	NextCursor string `json:"next_cursor"`
}

func (p pollPage) ids() []string {
	ids := make([]string, len(p.Data))
	for i, d := range p.Data {
		ids[i] = d.ID
	}
	return ids
}

// read reads a poll path with a query and requires a 200.
func (b *pollBundle) read(path, query string) pollPage {
	b.t.Helper()
	r := b.do("", http.MethodGet, path+"?"+query, nil)
	require.Equal(b.t, http.StatusOK, r.Status, string(r.Body))
	var p pollPage
	require.NoError(b.t, json.Unmarshal(r.Body, &p))
	return p
}

func (b *pollBundle) deliveryOfEvent(eventID string) map[string]any {
	b.t.Helper()
	list := b.deliveries("event_id=" + eventID)
	require.Len(b.t, list, 1)
	id := list[0].(map[string]any)["id"].(string)
	return b.do(b.keyA, http.MethodGet, "/v1/deliveries/"+id, nil).JSON(b.t)
}

// requireFieldError requires a 422 naming field.
func requireFieldError(t *testing.T, r response, field string) {
	t.Helper()
	p := requireProblem(t, r, http.StatusUnprocessableEntity)
	require.Contains(t, string(r.Body), `"field":"`+field+`"`, p)
}

func TestPollEndpointFieldsAndToken(t *testing.T) {
	b := setupPoll(t)
	id, path := b.pollEndpoint()

	r := b.do(b.keyA, http.MethodPost, "/v1/endpoints", map[string]any{"delivery": "poll", "url": "https://example.com/hook"})
	requireFieldError(t, r, "url")
	r = b.do(b.keyA, http.MethodPost, "/v1/endpoints", map[string]any{"delivery": "push"})
	requireFieldError(t, r, "url")
	r = b.do(b.keyA, http.MethodPost, "/v1/endpoints", map[string]any{"delivery": "carrier-pigeon", "url": "https://example.com/hook"})
	requireFieldError(t, r, "delivery")
	r = b.do(b.keyA, http.MethodPatch, "/v1/endpoints/"+id, map[string]any{"delivery": "push"})
	requireFieldError(t, r, "delivery")
	r = b.do(b.keyA, http.MethodPatch, "/v1/endpoints/"+id, map[string]any{"url": "https://example.com/hook"})
	requireFieldError(t, r, "url")
	r = b.do(b.keyA, http.MethodPatch, "/v1/endpoints/"+id, map[string]any{"description": "pulled", "delivery": "poll"})
	require.Equal(t, http.StatusOK, r.Status, string(r.Body))

	push := b.createEndpoint(b.keyA, nil)
	require.Equal(t, "push", push["delivery"])
	require.NotContains(t, push, "poll_url")
	require.NotContains(t, b.do(b.keyA, http.MethodGet, "/v1/endpoints/"+push["id"].(string)+"/secret", nil).JSON(t), "poll_url")

	secret := b.do(b.keyA, http.MethodGet, "/v1/endpoints/"+id+"/secret", nil).JSON(t)
	require.True(t, strings.HasSuffix(secret["poll_url"].(string), path), secret)
	b.read(path, "")

	// Rotating the secret rotates the token: the old URL stops at once.
	rotated := b.do(b.keyA, http.MethodPost, "/v1/endpoints/"+id+"/secret/rotate", nil).JSON(t)
	u, err := url.Parse(rotated["poll_url"].(string))
	require.NoError(t, err)
	require.NotEqual(t, path, u.Path)
	require.Equal(t, http.StatusNotFound, b.do("", http.MethodGet, path, nil).Status)
	b.read(u.Path, "")

	for _, bad := range []string{"/poll/x", "/poll/" + strings.Repeat("0", 32) + "_" + strings.Repeat("A", 43), path} {
		require.Equal(t, http.StatusNotFound, b.do("", http.MethodGet, bad, nil).Status, bad)
	}
	for _, q := range []string{"cursor=%21%21", "cursor=AAAAAAAAAAE", "limit=0", "limit=501", "wait=31", "wait=-1", "wait=x"} {
		r := b.do("", http.MethodGet, u.Path+"?"+q, nil)
		require.Equal(t, http.StatusUnprocessableEntity, r.Status, "%s: %s", q, r.Body)
	}
}

// TestPollReadsInOrderAndReplaysACursor: pages come in acceptance order;
// reading with a cursor marks what it passed delivered (an attempt of
// status 200), and reading an old cursor answers the same page again.
func TestPollReadsInOrderAndReplaysACursor(t *testing.T) {
	b := setupPoll(t)
	_, path := b.pollEndpoint()
	var events []string
	for i := range 5 {
		events = append(events, b.post(i))
	}

	first := b.read(path, "limit=2")
	require.Equal(t, events[:2], first.ids())
	require.JSONEq(t, `{"n":0}`, string(first.Data[0].Data))
	require.Equal(t, "order.created", first.Data[0].Type)
	for _, e := range events {
		require.Equal(t, "pending", b.deliveryOfEvent(e)["status"], "nothing is delivered before a read passes it")
	}

	second := b.read(path, "limit=2&cursor="+first.NextCursor)
	require.Equal(t, events[2:4], second.ids())
	for _, e := range events[:2] {
		d := b.deliveryOfEvent(e)
		require.Equal(t, "delivered", d["status"])
		attempts := d["attempts"].([]any)
		require.Len(t, attempts, 1)
		require.EqualValues(t, 200, attempts[0].(map[string]any)["status_code"])
	}
	require.Equal(t, "pending", b.deliveryOfEvent(events[2])["status"])

	again := b.read(path, "limit=2&cursor="+first.NextCursor)
	require.Equal(t, second, again, "an old cursor answers the same page again")
	require.Equal(t, first.ids(), b.read(path, "limit=2").ids())

	last := b.read(path, "cursor="+second.NextCursor)
	require.Equal(t, events[4:], last.ids())
	empty := b.read(path, "cursor="+last.NextCursor)
	require.Empty(t, empty.Data)
	require.Equal(t, last.NextCursor, empty.NextCursor)
	for _, e := range events {
		require.Equal(t, "delivered", b.deliveryOfEvent(e)["status"])
	}
	require.Len(t, b.deliveryOfEvent(events[0])["attempts"], 1, "reading past again records no second attempt")
}

// TestPollLateCommitIsNotSkipped holds one routing transaction open (an
// earlier event) while a later event commits and is read past; the
// earlier one, once committed, comes on the next page.
func TestPollLateCommitIsNotSkipped(t *testing.T) {
	b := setupPoll(t)
	ctx := context.Background()
	idStr, path := b.pollEndpoint()
	endpointID := uuid.MustParse(idStr)

	early, err := uuid.NewV7()
	require.NoError(t, err)
	tx, err := b.store.Pool().Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, `INSERT INTO events (id, tenant_id, type, payload, broadcast) VALUES ($1, $2, 'order.created', '{"late":true}', false)`,
		early, b.tenantA.ID)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `INSERT INTO deliveries (id, tenant_id, event_id, endpoint_id, event_type, next_attempt_at)
		VALUES ($1, $2, $3, $4, 'order.created', now())`, uuid.New(), b.tenantA.ID, early, endpointID)
	require.NoError(t, err)

	later := b.post(1)
	p1 := b.read(path, "")
	require.Equal(t, []string{later}, p1.ids())
	p2 := b.read(path, "cursor="+p1.NextCursor)
	require.Empty(t, p2.Data)

	require.NoError(t, tx.Commit(ctx))
	p3 := b.read(path, "cursor="+p2.NextCursor)
	require.Equal(t, []string{early.String()}, p3.ids(), "the late commit comes after the cursor, not behind it")
	require.Equal(t, p3, b.read(path, "cursor="+p1.NextCursor))
	b.read(path, "cursor="+p3.NextCursor)
	require.Equal(t, "delivered", b.deliveryOfEvent(early.String())["status"])
}

// TestPollWaitWakesOnPost: a read waiting on an empty page answers soon
// after an event is posted, woken by the nudge of its commit.
func TestPollWaitWakesOnPost(t *testing.T) {
	b := setupPoll(t)
	_, path := b.pollEndpoint()
	start := b.read(path, "")

	type answer struct {
		page pollPage
		at   time.Time
	}
	done := make(chan answer, 1)
	go func() {
		res, err := http.Get(b.srv.URL + path + "?wait=20&cursor=" + start.NextCursor)
		if err != nil {
			done <- answer{}
			return
		}
		defer res.Body.Close()
		var p pollPage
		_ = json.NewDecoder(res.Body).Decode(&p)
		done <- answer{page: p, at: time.Now()}
	}()
	require.Eventually(t, func() bool { return httpapi.PollWaiting(b.api) == 1 }, 5*time.Second, time.Millisecond)

	posted := time.Now()
	id := b.post(1)
	accepted := time.Now()
	got := <-done
	require.Equal(t, []string{id}, got.page.ids())
	latency := got.at.Sub(accepted)
	t.Logf("a waiting poll answered %v after the post's 202 (%v after it was sent)", latency, got.at.Sub(posted))
	require.Less(t, latency, time.Second)
}

// TestPollConcurrentReadersGetTheSamePage: readers of one cursor take
// turns on the endpoint's lock and answer alike.
func TestPollConcurrentReadersGetTheSamePage(t *testing.T) {
	b := setupPoll(t)
	_, path := b.pollEndpoint()
	for i := range 6 {
		b.post(i)
	}
	first := b.read(path, "limit=3")
	const readers = 8
	pages := make([]pollPage, readers)
	var wg sync.WaitGroup
	for i := range readers {
		wg.Go(func() {
			res, err := http.Get(b.srv.URL + path + "?limit=3&cursor=" + first.NextCursor)
			if err != nil {
				return
			}
			defer res.Body.Close()
			_ = json.NewDecoder(res.Body).Decode(&pages[i])
		})
	}
	wg.Wait()
	require.Len(t, pages[0].Data, 3)
	for _, p := range pages[1:] {
		require.Equal(t, pages[0], p)
	}
}

// TestPollEndpointsGetNoDispatch: an event for a push and a poll endpoint
// queues a dispatch job for the push one only, and the sweeper's walk,
// which finds endpoints with deliveries due and no job, passes the poll
// one by.
func TestPollEndpointsGetNoDispatch(t *testing.T) {
	b := setupPoll(t)
	ctx := context.Background()
	pollID, _ := b.pollEndpoint()
	pushID := b.createEndpoint(b.keyA, nil)["id"].(string)
	b.subscribe(b.keyA, pushID, nil, "*")
	b.post(1)

	jobsFor := func() []string {
		var ids []string
		for _, a := range jobstest.ArgsOf[jobs.DispatchArgs](t, b.store.Pool()) {
			ids = append(ids, a.EndpointID.String())
		}
		return ids
	}
	// The push endpoint's job shows the nudge of both endpoints has run.
	require.Eventually(t, func() bool { return len(jobsFor()) > 0 }, 5*time.Second, 5*time.Millisecond)
	require.Equal(t, []string{pushID}, jobsFor())
	require.Len(t, b.deliveries("endpoint_id="+pollID), 1)

	jobstest.DeleteKind(t, b.store.Pool(), "dispatch")
	w, err := jobs.EndpointsNeedingDispatch(ctx, b.store.Pool(), 100, uuid.Nil)
	require.NoError(t, err)
	require.Equal(t, []uuid.UUID{uuid.MustParse(pushID)}, w.Due)
}

// changed waits for the Nudger to hear of a change to the endpoint: its
// stamp moves on from before.
func (b *pollBundle) changed(id string, before uint64) {
	b.t.Helper()
	require.Eventually(b.t, func() bool {
		s, ok := b.nudger.PollStamp(uuid.MustParse(id))
		return ok && s != before
	}, 10*time.Second, time.Millisecond, "no change of %s was heard", id)
}

func (b *pollBundle) stamp(id string) uint64 {
	b.t.Helper()
	s, ok := b.nudger.PollStamp(uuid.MustParse(id))
	require.True(b.t, ok)
	return s
}

// TestPollKeepsItsLookUpUntilTheEndpointChanges: idle re-polls use the
// look-up the first read made, and every change that could make it wrong
// is heard: a post, a test event (a replay's path), the secret rotated
// elsewhere, the tenant disabled and enabled, the listener's connection
// lost, the endpoint deleted.
func TestPollKeepsItsLookUpUntilTheEndpointChanges(t *testing.T) {
	b := setupPoll(t)
	ctx := context.Background()
	id, path := b.pollEndpoint()
	lookUps := func() int64 { return httpapi.PollLookUps(b.api) }

	cursor := b.read(path, "").NextCursor
	base := lookUps()
	for range 5 {
		require.Empty(t, b.read(path, "cursor="+cursor).Data)
	}
	require.Equal(t, base, lookUps(), "idle re-polls looked the endpoint up again")

	// New deliveries: a post, then a test event, each seen by the next read.
	before := b.stamp(id)
	posted := b.post(1)
	b.changed(id, before)
	p := b.read(path, "cursor="+cursor)
	require.Equal(t, []string{posted}, p.ids())
	cursor = p.NextCursor
	require.Empty(t, b.read(path, "cursor="+cursor).Data)
	before, base = b.stamp(id), lookUps()
	r := b.do(b.keyA, http.MethodPost, "/v1/endpoints/"+id+"/test", nil)
	require.Equal(t, http.StatusAccepted, r.Status, string(r.Body))
	b.changed(id, before)
	p = b.read(path, "cursor="+cursor)
	require.Equal(t, []string{r.JSON(t)["id"].(string)}, p.ids())
	require.Greater(t, lookUps(), base)
	cursor = p.NextCursor

	// The secret rotated by another process (the store, not this API,
	// whose own rotation forgets at once): the trigger's notification
	// retires the old token.
	require.Empty(t, b.read(path, "cursor="+cursor).Data)
	before = b.stamp(id)
	secret := send.NewSecret()
	require.NoError(t, b.store.RotateEndpointSecret(ctx, b.tenantA.ID, uuid.MustParse(id), secret, time.Now().Add(time.Hour)))
	b.changed(id, before)
	require.Equal(t, http.StatusNotFound, b.do("", http.MethodGet, path, nil).Status)
	u, err := url.Parse(poll.URL("http://sluice.test", uuid.MustParse(id), secret))
	require.NoError(t, err)
	path = u.Path
	require.Empty(t, b.read(path, "cursor="+cursor).Data)

	// The tenant disabled, then enabled.
	for _, disabled := range []bool{true, false} {
		before = b.stamp(id)
		_, err := b.store.Pool().Exec(ctx, `UPDATE tenants SET disabled_at = CASE WHEN $2 THEN now() END WHERE id = $1`, b.tenantA.ID, disabled)
		require.NoError(t, err)
		b.changed(id, before)
		want := map[bool]int{true: http.StatusForbidden, false: http.StatusOK}[disabled]
		require.Equal(t, want, b.do("", http.MethodGet, path+"?cursor="+cursor, nil).Status)
	}

	// The listener's connection lost: nothing kept before it is used.
	require.Empty(t, b.read(path, "cursor="+cursor).Data)
	before, base = b.stamp(id), lookUps()
	_, err = b.store.Pool().Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE datname = current_database() AND query LIKE 'LISTEN %'`)
	require.NoError(t, err)
	b.changed(id, before)
	require.Empty(t, b.read(path, "cursor="+cursor).Data)
	require.Equal(t, base+1, lookUps())

	// Deleted elsewhere.
	before = b.stamp(id)
	_, err = b.store.Pool().Exec(ctx, `DELETE FROM endpoints WHERE id = $1`, id)
	require.NoError(t, err)
	b.changed(id, before)
	require.Equal(t, http.StatusNotFound, b.do("", http.MethodGet, path, nil).Status)
}

// TestPollReadsDrawFromTheirURLAndTheTenant: every read draws from its
// poll URL's bucket; a read that needs the database draws from the
// tenant's too, and an idle re-poll, answered from memory, does not.
func TestPollReadsDrawFromTheirURLAndTheTenant(t *testing.T) {
	clk := newClock()
	b := setupPollWith(t, apirate.Config{Tenant: apirate.MustParse("5/s"), Now: clk.now}) // bursts of 10
	id, path := b.pollEndpoint()
	cursor := b.read(path, "").NextCursor

	// The URL's bucket runs out; the tenant's does not.
	status := func(key, path string) response { return b.do(key, http.MethodGet, path, nil) }
	reads := 1
	for ; reads < 20; reads++ {
		if status("", path+"?cursor="+cursor).Status != http.StatusOK {
			break
		}
	}
	require.Equal(t, 10, reads, "reads of the URL before its bucket ran out")
	r := status("", path+"?cursor="+cursor)
	p := requireProblem(t, r, http.StatusTooManyRequests)
	require.Contains(t, p["detail"], "poll URL")
	require.Equal(t, http.StatusOK, status(b.keyA, "/v1/endpoints").Status)

	// The tenant's bucket emptied: an idle re-poll is still answered.
	clk.advance(2 * time.Second)
	for status(b.keyA, "/v1/endpoints").Status == http.StatusOK {
	}
	require.Equal(t, http.StatusOK, status("", path+"?cursor="+cursor).Status)

	// A read with a delivery to answer needs the database: refused.
	clk.advance(200 * time.Millisecond) // a token for the post
	before := b.stamp(id)
	b.post(1)
	b.changed(id, before)
	r = status("", path+"?cursor="+cursor)
	p = requireProblem(t, r, http.StatusTooManyRequests)
	require.Contains(t, p["detail"], "tenant")
}

// TestPollItemIsThePushBody: each item of a poll page is, byte for byte,
// the body a push endpoint is sent (dispatch.Body): the payload exactly as
// posted, its spaces and its <, > and & unescaped, so that a client
// (sluice listen) can forward it as it is and its signature verifies.
func TestPollItemIsThePushBody(t *testing.T) {
	b := setupPoll(t)
	_, path := b.pollEndpoint()
	payload := `{ "n" : 1,  "html": "<a href=\"x\">&amp;</a>", "e": "é\u00e9", "list": [1, 2.50, null] }`
	r := b.do(b.keyA, http.MethodPost, "/v1/events", `{"type": "order.created", "payload": `+payload+`}`)
	require.Equal(t, http.StatusAccepted, r.Status, string(r.Body))
	id := r.JSON(t)["id"].(string)

	r = b.do("", http.MethodGet, path, nil)
	require.Equal(t, http.StatusOK, r.Status, string(r.Body))
	var page struct {
		Data []json.RawMessage `json:"data"`
	}
	require.NoError(t, json.Unmarshal(r.Body, &page))
	require.Len(t, page.Data, 1)
	var item struct {
		Timestamp time.Time `json:"timestamp"`
	}
	require.NoError(t, json.Unmarshal(page.Data[0], &item))
	want := dispatch.Body(dispatch.Claimed{
		EventID: uuid.MustParse(id), EventType: "order.created", EventCreatedAt: item.Timestamp, Payload: []byte(payload),
	})
	require.Equal(t, string(want), string(page.Data[0]))
}
