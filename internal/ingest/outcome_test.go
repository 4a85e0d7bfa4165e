package ingest_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/dbwait"
	"github.com/sluice-dev/sluice/internal/ingest"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store"
	"github.com/sluice-dev/sluice/internal/testkit/pgtest"
	"github.com/sluice-dev/sluice/internal/testkit/storetest"
)

// TestCommitAnswerLost: the connection of a post's commit is cut after
// Postgres made the commit and answered it, before the answer is read (a
// leader shut down, a network cut): the commit's outcome is unknown to
// the API. The post is tried again, meets the row its first try stored,
// and is answered with that event: never a second event, never an error.
// For a single post (group commit), a batch, an event whose commit is a
// transaction's COMMIT (a coalesce key) and a large event.
func TestCommitAnswerLost(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		events int
		post   func(ctx context.Context, in *ingest.Ingester, tenant uuid.UUID, payload func(int) []byte) ([]sluice.Event, error)
		inline bool // deliveries made with the events, not by a fan-out job
	}{
		{name: "single", events: 1, inline: true, post: func(ctx context.Context, in *ingest.Ingester, tenant uuid.UUID, payload func(int) []byte) ([]sluice.Event, error) {
			ev, err := in.Submit(ctx, tenant, sluice.NewEvent{Type: "t.cut", Payload: payload(0)})
			return []sluice.Event{ev}, err
		}},
		{name: "batch", events: 5, inline: true, post: func(ctx context.Context, in *ingest.Ingester, tenant uuid.UUID, payload func(int) []byte) ([]sluice.Event, error) {
			evs := make([]sluice.NewEvent, 5)
			for i := range evs {
				evs[i] = sluice.NewEvent{Type: "t.cut", Payload: payload(i)}
			}
			return in.SubmitBatch(ctx, tenant, evs)
		}},
		{name: "transaction", events: 1, post: func(ctx context.Context, in *ingest.Ingester, tenant uuid.UUID, payload func(int) []byte) ([]sluice.Event, error) {
			ev, err := in.Submit(ctx, tenant, sluice.NewEvent{Type: "t.cut", Payload: payload(0), CoalesceKey: new("k")})
			return []sluice.Event{ev}, err
		}},
		{name: "large", events: 1, inline: true, post: func(ctx context.Context, in *ingest.Ingester, tenant uuid.UUID, payload func(int) []byte) ([]sluice.Event, error) {
			p := payload(0)
			large := fmt.Appendf(nil, `{"pad":"%s",%s`, strings.Repeat("x", ingest.LargeEvent), p[1:])
			ev, err := in.Submit(ctx, tenant, sluice.NewEvent{Type: "t.cut", Payload: large})
			return []sluice.Event{ev}, err
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			cut := &cutter{marker: []byte(uuid.NewString())}
			pool := cutPool(t, cut)
			f := storetest.On(t, pool, pool)
			endpoint := subscribedEndpoint(t, f, "cut", "*")
			in := start(t, f, ingest.Config{Committers: 2})
			payload := func(i int) []byte { return fmt.Appendf(nil, `{"cut":"%s","i":%d}`, cut.marker, i) }

			cut.armed.Store(true)
			rctx, stop := dbwait.WithBudget(ctx, time.Minute) // generous: a loaded box
			defer stop()
			rctx = dbwait.WatchCommit(rctx)
			got, err := tc.post(rctx, in, f.TenantA.ID, payload)
			require.Equal(t, int64(1), cut.cuts.Load(), "the commit's answer was cut once")
			require.NoError(t, err, "a commit whose answer was lost is tried again and found made")
			require.Len(t, got, tc.events)

			ids := make([]uuid.UUID, len(got))
			for i, ev := range got {
				ids[i] = ev.ID
			}
			var stored []uuid.UUID
			rows, err := pool.Query(ctx, `SELECT id FROM events WHERE payload::text LIKE '%' || $1 || '%' ORDER BY id`, string(cut.marker))
			require.NoError(t, err)
			for rows.Next() {
				var id uuid.UUID
				require.NoError(t, rows.Scan(&id))
				stored = append(stored, id)
			}
			require.NoError(t, rows.Err())
			require.ElementsMatch(t, ids, stored, "each event stored once, answered as stored")

			for _, ev := range got {
				read, _, err := f.Store.GetEvent(ctx, f.TenantA.ID, ev.ID)
				require.NoError(t, err)
				require.True(t, ev.CreatedAt.Equal(read.CreatedAt), "answered with the first try's row: %s, stored %s", ev.CreatedAt, read.CreatedAt)
			}
			if tc.inline {
				var deliveries int
				require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM deliveries WHERE endpoint_id = $1 AND event_id = ANY($2)`, endpoint, ids).Scan(&deliveries))
				require.Equal(t, tc.events, deliveries, "one delivery per event")
			}
		})
	}
}

// cutPool is a pool on a database of its own whose connections cut
// connects through.
func cutPool(t *testing.T, cut *cutter) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(pgtest.NewDatabase(t))
	require.NoError(t, err)
	store.ConfigurePool(cfg)
	cfg.ConnConfig.Tracer = dbwait.Tracer{}
	cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &cutConn{Conn: c, cut: cut}, nil
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// cutter cuts, while armed, the connection that sends marker, once
// Postgres has answered the commit that follows: the answer is read off
// the socket and thrown away, and the client sees the connection fail.
// It disarms itself after one cut.
type cutter struct {
	marker []byte
	armed  atomic.Bool
	cuts   atomic.Int64
}

// readyIdle ends Postgres's answer once a transaction is over (committed):
// ReadyForQuery with transaction status idle.
var readyIdle = []byte{'Z', 0, 0, 0, 5, 'I'}

type cutConn struct {
	net.Conn
	cut *cutter

	mu   sync.Mutex
	sent bool   // a write carried the marker while armed
	tail []byte // the last bytes read since
}

func (c *cutConn) Write(p []byte) (int, error) {
	if c.cut.armed.Load() && bytes.Contains(p, c.cut.marker) {
		c.mu.Lock()
		c.sent = true
		c.mu.Unlock()
	}
	return c.Conn.Write(p) //nolint:wrapcheck // a net.Conn's own
}

func (c *cutConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.sent || n == 0 {
		return n, err //nolint:wrapcheck // a net.Conn's own
	}
	c.tail = append(c.tail, p[:n]...)
	if len(c.tail) > len(readyIdle) {
		c.tail = c.tail[len(c.tail)-len(readyIdle):]
	}
	if bytes.Equal(c.tail, readyIdle) && c.cut.armed.CompareAndSwap(true, false) {
		c.sent = false
		c.cut.cuts.Add(1)
		_ = c.Conn.Close()
		return 0, &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
	}
	return n, err //nolint:wrapcheck // a net.Conn's own
}
