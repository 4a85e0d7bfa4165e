package app_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/app"
	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/testkit/brokertest"
)

// brokerMsg is one message as a broker's consumer reads it: the body and
// the webhook-* headers.
type brokerMsg struct {
	body    []byte
	headers http.Header
}

// brokerKind is one destination kind against its real broker, as a
// consumer sees it. A destination is named: its stream, subject or
// routing key.
type brokerKind struct {
	// dest is the destination option delivering to name.
	dest func(name string) map[string]any
	// read is every message delivered to name so far, in order.
	read func(t *testing.T, name string) []brokerMsg
	// breakName makes name refuse deliveries, fix makes it take them.
	breakName, fix func(t *testing.T, name string)
	// open counts the broker's connections from Sluice, at most maxOpen
	// while it works (a pool's bound).
	open    func(t *testing.T) int
	maxOpen int
	// alarm, when the kind has one, turns the broker's back-pressure on
	// or off (RabbitMQ's memory alarm).
	alarm func(t *testing.T, on bool)
}

func redisKind(t *testing.T) brokerKind {
	b := brokertest.Redis(t)
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(b.Port), Protocol: 2, DisableIdentity: true})
	t.Cleanup(func() { _ = rdb.Close() })
	return brokerKind{
		dest: func(name string) map[string]any { return map[string]any{"type": "redis", "url": b.URL, "stream": name} },
		read: func(t *testing.T, name string) []brokerMsg {
			entries, err := rdb.XRange(t.Context(), name, "-", "+").Result()
			require.NoError(t, err)
			var out []brokerMsg
			for _, e := range entries {
				m := brokerMsg{body: []byte(e.Values["body"].(string)), headers: http.Header{}}
				for k, v := range e.Values {
					if strings.HasPrefix(k, "webhook-") {
						m.headers.Set(k, v.(string))
					}
				}
				out = append(out, m)
			}
			return out
		},
		breakName: func(t *testing.T, name string) {
			require.NoError(t, rdb.Set(t.Context(), name, "not a stream", 0).Err())
		},
		fix: func(t *testing.T, name string) { require.NoError(t, rdb.Del(t.Context(), name).Err()) },
		open: func(t *testing.T) int {
			clients, err := rdb.ClientList(t.Context()).Result()
			require.NoError(t, err)
			return strings.Count(clients, "\n") - 1 // this test's own
		},
		maxOpen: 4, // go-redis pools a connection per command in flight
	}
}

func natsKind(t *testing.T) brokerKind {
	monitor := loopbackPort(t)
	b := brokertest.NATS(t, "-m", strconv.Itoa(monitor))
	nc, err := nats.Connect(b.URL)
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	stream := func(name string) string { return "S_" + strings.ReplaceAll(name, ".", "_") }
	return brokerKind{
		dest: func(name string) map[string]any { return map[string]any{"type": "nats", "url": b.URL, "subject": name} },
		read: func(t *testing.T, name string) []brokerMsg {
			s, err := js.Stream(t.Context(), stream(name))
			require.NoError(t, err)
			info, err := s.Info(t.Context())
			require.NoError(t, err)
			var out []brokerMsg
			for seq := info.State.FirstSeq; seq > 0 && seq <= info.State.LastSeq; seq++ {
				m, err := s.GetMsg(t.Context(), seq)
				require.NoError(t, err)
				msg := brokerMsg{body: m.Data, headers: http.Header{}}
				for k, v := range m.Header { // NATS keeps names as written: lower-case
					msg.headers.Set(k, v[0])
				}
				out = append(out, msg)
			}
			return out
		},
		breakName: func(*testing.T, string) {}, // no stream takes the subject yet
		fix: func(t *testing.T, name string) {
			_, err := js.CreateStream(t.Context(), jetstream.StreamConfig{Name: stream(name), Subjects: []string{name}})
			require.NoError(t, err)
		},
		open: func(t *testing.T) int {
			resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(monitor) + "/connz")
			require.NoError(t, err)
			defer resp.Body.Close()
			var connz struct {
				Connections []struct{ Name string } `json:"connections"`
			}
			require.NoError(t, json.NewDecoder(resp.Body).Decode(&connz))
			n := 0
			for _, c := range connz.Connections {
				if c.Name == "sluice" {
					n++
				}
			}
			return n
		},
		maxOpen: 1,
	}
}

func amqpKind(t *testing.T) brokerKind {
	b := brokertest.RabbitMQ(t)
	ch := b.Channel(t)
	require.NoError(t, ch.ExchangeDeclare("hooks", "direct", true, false, false, false, nil))
	got := map[string][]brokerMsg{} // read is destructive: what was read so far
	bind := func(t *testing.T, name string) {
		_, err := ch.QueueDeclare(name, true, false, false, false, nil)
		require.NoError(t, err)
		require.NoError(t, ch.QueueBind(name, name, "hooks", false, nil))
	}
	return brokerKind{
		dest: func(name string) map[string]any {
			return map[string]any{"type": "amqp", "url": b.URL, "exchange": "hooks", "routing_key": name}
		},
		read: func(t *testing.T, name string) []brokerMsg {
			for {
				d, ok, err := ch.Get(name, true)
				require.NoError(t, err)
				if !ok {
					return got[name]
				}
				m := brokerMsg{body: d.Body, headers: http.Header{}}
				for k, v := range d.Headers {
					m.headers.Set(k, v.(string))
				}
				got[name] = append(got[name], m)
			}
		},
		breakName: func(*testing.T, string) {}, // no queue is bound to the routing key yet
		fix:       bind,
		open: func(t *testing.T) int {
			return strings.Count(b.Ctl(t, "-q", "list_connections", "client_properties"), `"sluice"`)
		},
		maxOpen: 1, // its publishes share it, a channel each
		alarm: func(t *testing.T, on bool) {
			b.Ctl(t, "set_vm_memory_high_watermark", map[bool]string{true: "0.0000001", false: "0.4"}[on])
		},
	}
}

func loopbackPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Each destination kind against its real broker keeps HTTP's guarantees:
// deliveries confirmed, in order per ordering_key on a FIFO endpoint,
// each verified by a consumer from the message's own headers; a
// delivery the broker keeps refusing goes dead with the broker's error
// and, the broker fixed, its replay is delivered. The worker process
// holds one connection per broker while it works and none once closed.
func TestBrokerKinds(t *testing.T) {
	h := startWith(t, nil, app.Roles{API: true})
	kinds := map[string]brokerKind{"redis": redisKind(t), "nats": natsKind(t), "amqp": amqpKind(t)}
	w := h.workerProcess()

	for name, k := range kinds {
		t.Run(name, func(t *testing.T) {
			ordered, dead := name+".ordered", name+".dead"
			var ep struct{ ID, Secret string }
			h.call(http.MethodPost, "/v1/endpoints", map[string]any{"destination": k.dest(ordered), "ordering": "fifo", "max_in_flight": 4},
				http.StatusCreated, &ep)
			h.call(http.MethodPost, "/v1/subscriptions", map[string]any{"endpoint_id": ep.ID, "event_types": []string{ordered}}, http.StatusCreated, nil)
			k.fix(t, ordered)
			const perLine = 8
			for n := range perLine {
				for _, line := range []string{"a", "b"} {
					h.call(http.MethodPost, "/v1/events", map[string]any{"type": ordered, "ordering_key": line,
						"payload": map[string]any{"line": line, "n": n}}, http.StatusAccepted, nil)
				}
			}
			eventually(t, 30*time.Second, func() bool { return len(h.deliveries("status=delivered&endpoint_id="+ep.ID)) == 2*perLine },
				"delivered: %v", lazy(func() any { return h.deliveries("endpoint_id=" + ep.ID) }))
			msgs := k.read(t, ordered)
			require.Len(t, msgs, 2*perLine, "each confirmed once")
			wh, err := standardwebhooks.NewWebhook(ep.Secret)
			require.NoError(t, err)
			next := map[string]int{}
			lastSeq := map[string]int{}
			for _, m := range msgs {
				require.NoError(t, wh.Verify(m.body, m.headers), "a consumer verifies the message")
				var body struct {
					Data struct {
						Line string
						N    int
					}
				}
				require.NoError(t, json.Unmarshal(m.body, &body))
				line := body.Data.Line
				require.Equal(t, next[line], body.Data.N, "line %s in order", line)
				next[line]++
				seq, err := strconv.Atoi(m.headers.Get("webhook-sequence"))
				require.NoError(t, err)
				require.Greater(t, seq, lastSeq[line], "webhook-sequence increases along line %s", line)
				lastSeq[line] = seq
			}

			// Refused on every attempt: dead, the broker's word recorded.
			k.breakName(t, dead)
			var dep struct{ ID, Secret string }
			h.call(http.MethodPost, "/v1/endpoints", map[string]any{"destination": k.dest(dead)}, http.StatusCreated, &dep)
			h.call(http.MethodPost, "/v1/subscriptions", map[string]any{"endpoint_id": dep.ID, "event_types": []string{dead}}, http.StatusCreated, nil)
			h.post(dead, map[string]int{"n": 1})
			eventually(t, 30*time.Second, func() bool { return len(h.deliveries("status=dead&endpoint_id="+dep.ID)) == 1 }, "dead: %v",
				lazy(func() any { return h.deliveries("endpoint_id=" + dep.ID) }))
			var d delivery
			h.call(http.MethodGet, "/v1/deliveries/"+h.deliveries("endpoint_id=" + dep.ID)[0].ID, nil, http.StatusOK, &d)
			require.Len(t, d.Attempts, 3)
			for _, a := range d.Attempts {
				require.Nil(t, a.StatusCode)
				require.NotEmpty(t, *a.Error)
			}
			t.Logf("%s refused: %s", name, *d.Attempts[0].Error)

			// Fixed, the replay is delivered and verifies.
			k.fix(t, dead)
			var replay delivery
			h.call(http.MethodPost, "/v1/deliveries/"+d.ID+"/replay", nil, http.StatusAccepted, &replay)
			require.Equal(t, d.ID, replay.ReplayedFrom)
			eventually(t, 30*time.Second, func() bool { return len(h.deliveries("status=delivered&endpoint_id="+dep.ID)) == 1 }, "replay delivered")
			got := k.read(t, dead)
			require.Len(t, got, 1)
			wh, err = standardwebhooks.NewWebhook(dep.Secret)
			require.NoError(t, err)
			require.NoError(t, wh.Verify(got[0].body, got[0].headers))
		})
	}

	// RabbitMQ's memory alarm blocks the connection: the endpoint is
	// throttled, no attempt spent, and delivers once the alarm clears.
	t.Run("amqp blocked", func(t *testing.T) {
		k := kinds["amqp"]
		k.fix(t, "amqp.blocked")
		var ep struct{ ID string }
		h.call(http.MethodPost, "/v1/endpoints", map[string]any{"destination": k.dest("amqp.blocked")}, http.StatusCreated, &ep)
		h.call(http.MethodPost, "/v1/subscriptions", map[string]any{"endpoint_id": ep.ID, "event_types": []string{"amqp.blocked"}}, http.StatusCreated, nil)
		k.alarm(t, true)
		h.post("amqp.blocked", map[string]int{"n": 1})
		var status struct{ Status string }
		eventually(t, 30*time.Second, func() bool {
			h.call(http.MethodGet, "/v1/endpoints/"+ep.ID, nil, http.StatusOK, &status)
			return status.Status == "throttled"
		}, "throttled")
		ds := h.deliveries("endpoint_id=" + ep.ID)
		require.Len(t, ds, 1)
		require.Equal(t, "pending", ds[0].Status, "no retry spent: not failed")
		var d delivery
		h.call(http.MethodGet, "/v1/deliveries/"+ds[0].ID, nil, http.StatusOK, &d)
		require.NotEmpty(t, d.Attempts)
		require.Nil(t, d.Attempts[0].StatusCode)
		require.Contains(t, *d.Attempts[0].Error, "connection blocked")
		k.alarm(t, false)
		eventually(t, 30*time.Second, func() bool { return len(h.deliveries("status=delivered&endpoint_id="+ep.ID)) == 1 }, "delivered once the alarm clears")
		require.NotEmpty(t, k.read(t, "amqp.blocked"))
	})

	for name, k := range kinds {
		n := k.open(t)
		require.True(t, n >= 1 && n <= k.maxOpen, "%s: %d connections, shared by both endpoints and every delivery", name, n)
	}
	w.Close()
	for name, k := range kinds {
		eventually(t, 10*time.Second, func() bool { return k.open(t) == 0 }, "%s: a connection left open after the worker closed", name)
	}
}

// workerProcess starts a worker-only process on the harness's database,
// closed by the test (or at its end if the test did not).
func (h *harness) workerProcess() *closeOnce {
	h.t.Helper()
	cfg, err := config.Parse(func(k string) string { return h.env[k] }, true)
	require.NoError(h.t, err)
	p, err := app.New(context.Background(), cfg, app.Roles{Worker: true}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.NoError(h.t, err)
	require.NoError(h.t, p.Start(context.Background()))
	c := &closeOnce{p: p}
	h.t.Cleanup(c.Close)
	return c
}

type closeOnce struct {
	p    *app.Process
	done bool
}

func (c *closeOnce) Close() {
	if !c.done {
		c.done = true
		c.p.Close()
	}
}
