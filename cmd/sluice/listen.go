package main

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/internal/send"
)

// Defaults of listenConfig.
const (
	listenWait         = 30 * time.Second // the poll API's longest wait
	listenLimit        = 100
	listenLocalTimeout = 30 * time.Second
	listenFirstBackoff = 250 * time.Millisecond
	listenMaxBackoff   = 10 * time.Second
)

// errListenStop ends `sluice listen` with a message and no retry: the
// poll URL or the cursor file is wrong, and trying again cannot help.
var errListenStop = errors.New("cannot listen")

// listenConfig configures a listener. Zero fields take the defaults above.
type listenConfig struct {
	PollURL    string // an endpoint's poll_url
	ForwardTo  string // the local receiver's URL
	Secret     string // whsec_…: signs what is forwarded; "": unsigned
	CursorFile string // "": listenCursorFile's default
	Out        io.Writer
	Logger     *slog.Logger
	// Backoff is how long to wait before the next try after failures
	// failed tries in a row (the local server's, or Sluice's).
	Backoff func(failures int) time.Duration
	Wait    time.Duration // each read's long-poll wait (?wait=)
	Limit   int           // a page's deliveries at most (?limit=)
}

// listenBackoff doubles from listenFirstBackoff up to listenMaxBackoff.
func listenBackoff(failures int) time.Duration {
	d := listenFirstBackoff
	for i := 1; i < failures && d < listenMaxBackoff; i++ {
		d *= 2
	}
	return min(d, listenMaxBackoff)
}

// listener forwards a poll endpoint's deliveries to a local URL, as
// they would be pushed: one at a time, in order, each until the local
// server answers 2xx.
//
// Its place is a cursorState: the cursor of the page being forwarded and
// how many of the page's deliveries the local server has acknowledged.
// Reading a cursor again answers the same page (what was placed since
// only after it), so after a restart the first Acked deliveries of the
// page are passed over and nothing acknowledged is sent again; the
// cursor moves on, marking the page delivered in Sluice, only when all
// of it was acknowledged. Should the page not start as the state says
// (its deliveries expired meanwhile), none is passed over: a repeat
// rather than a skip.
type listener struct {
	cfg      listenConfig
	pollURL  *url.URL
	keys     [][]byte
	poll     *http.Client
	local    *http.Client
	redacted string // the poll URL without its token, for messages
}

// cursorState is what the cursor file holds: the cursor of the page
// being forwarded, how many of its deliveries were acknowledged, and the
// id of the last of them.
type cursorState struct {
	Cursor string `json:"cursor"`
	Acked  int    `json:"acked,omitempty"`
	LastID string `json:"last_id,omitempty"`
}

// delivery is one delivery of a poll page: its body, as a push endpoint
// is sent it, and the id and type in it.
type delivery struct {
	Body []byte `json:"-"`
	ID   string `json:"id"`
	Type string `json:"type"`
}

// listenCmd is `sluice listen`.
func listenCmd(ctx context.Context, args []string, stdout io.Writer, logger *slog.Logger) error {
	fs := flag.NewFlagSet("listen", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var cfg listenConfig
	fs.StringVar(&cfg.PollURL, "poll-url", "", "the poll endpoint's poll_url")
	fs.StringVar(&cfg.ForwardTo, "forward-to", "", "the local URL to post each delivery to")
	fs.StringVar(&cfg.Secret, "secret", "", "the endpoint's signing secret (whsec_…), to sign what is forwarded")
	fs.StringVar(&cfg.CursorFile, "cursor-file", "", "where to keep the cursor (default: in the user's config directory)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg.Out, cfg.Logger = stdout, logger
	l, err := newListener(cfg)
	if err != nil {
		return err
	}
	return l.run(ctx)
}

// newListener checks cfg and resolves its defaults.
func newListener(cfg listenConfig) (*listener, error) {
	if cfg.PollURL == "" {
		return nil, errors.New("--poll-url is required: the poll_url of an endpoint with delivery \"poll\"")
	}
	u, err := url.Parse(cfg.PollURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || pollToken(u) == "" {
		return nil, fmt.Errorf("--poll-url %q is not a poll URL: it looks like https://sluice.example/poll/<token>, "+
			"as the endpoint's poll_url shows", cfg.PollURL)
	}
	u.RawQuery, u.Fragment = "", ""
	if cfg.ForwardTo == "" {
		return nil, errors.New("--forward-to is required: the local URL to post deliveries to, such as http://localhost:8000/webhooks")
	}
	f, err := url.Parse(cfg.ForwardTo)
	if err != nil || (f.Scheme != "http" && f.Scheme != "https") || f.Host == "" {
		return nil, fmt.Errorf("--forward-to %q is not an http or https URL, such as http://localhost:8000/webhooks", cfg.ForwardTo)
	}
	l := &listener{pollURL: u, redacted: strings.TrimSuffix(u.String(), pollToken(u)) + "…"}
	if cfg.Secret != "" {
		key, err := send.Key(cfg.Secret)
		if err != nil || !strings.HasPrefix(cfg.Secret, send.SecretPrefix) {
			return nil, errors.New("--secret is not a signing secret: it looks like whsec_ and base64, " +
				"as GET /v1/endpoints/{id}/secret shows")
		}
		l.keys = [][]byte{key}
	}
	if cfg.CursorFile == "" {
		if cfg.CursorFile, err = listenCursorFile(u); err != nil {
			return nil, err
		}
	}
	cfg.Out = cmp.Or[io.Writer](cfg.Out, io.Discard)
	cfg.Logger = cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler))
	if cfg.Backoff == nil {
		cfg.Backoff = listenBackoff
	}
	cfg.Wait = min(cmp.Or(cfg.Wait, listenWait), listenWait)
	cfg.Limit = cmp.Or(cfg.Limit, listenLimit)
	l.cfg = cfg
	l.poll = &http.Client{Timeout: cfg.Wait + listenLocalTimeout}
	// As Sluice pushes: a redirect is an answer, not followed.
	l.local = &http.Client{
		Timeout:       listenLocalTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return l, nil
}

// listenCursorFile is the default cursor file of a poll URL, in the
// user's config directory: named after its host and endpoint (the part
// of the token before "_"), not its token, so that rotating the secret,
// which changes the token, keeps the place.
func listenCursorFile(u *url.URL) (string, error) {
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("find the user's config directory for the cursor file (or give --cursor-file): %w", err)
	}
	endpoint, _, _ := strings.Cut(pollToken(u), "_")
	sum := sha256.Sum256([]byte(u.Host + "/" + endpoint))
	return filepath.Join(dir, "sluice", "listen-"+hex.EncodeToString(sum[:8])+".cursor"), nil
}

// pollToken is the token of a poll URL (SLUICE_PUBLIC_URL, which may
// have a path, then /poll/<token>); "" when u is none.
func pollToken(u *url.URL) string {
	dir, token := path.Split(u.Path)
	if !strings.HasSuffix(dir, "/poll/") {
		return ""
	}
	return token
}

// run forwards until ctx ends (nil) or the poll URL or cursor file is
// found wrong (an error saying so).
func (l *listener) run(ctx context.Context) error {
	state, err := l.loadCursor()
	if err != nil {
		return err
	}
	signed := "signed with --secret"
	if l.keys == nil {
		signed = "unsigned: give --secret to sign them"
	}
	l.cfg.Logger.Info("listening: forwarding deliveries", "poll_url", l.redacted, "forward_to", l.cfg.ForwardTo,
		"cursor_file", l.cfg.CursorFile, "signatures", signed)
	failures := 0
	for ctx.Err() == nil {
		items, next, err := l.read(ctx, state.Cursor)
		if errors.Is(err, errListenStop) {
			return err
		}
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			failures++
			var ra retryAfter
			wait := l.cfg.Backoff(failures)
			if errors.As(err, &ra) {
				wait = max(wait, time.Duration(ra))
			}
			l.cfg.Logger.Warn("cannot read the poll URL; retrying", "poll_url", l.redacted, "err", err, "in", wait)
			pause(ctx, wait)
			continue
		}
		failures = 0
		skip := l.acknowledged(state, items)
		for i := skip; i < len(items); i++ {
			acked := cursorState{Cursor: state.Cursor, Acked: i + 1, LastID: items[i].ID}
			if i == len(items)-1 {
				acked = cursorState{Cursor: next}
			}
			ok, err := l.forward(ctx, items[i], func() error { return l.saveCursor(acked) })
			if err != nil {
				return err
			}
			if !ok {
				return nil // ctx ended: a clean stop
			}
			state = acked
		}
		if len(items) > 0 && skip == len(items) {
			// All of it was acknowledged before a restart: move on.
			state = cursorState{Cursor: next}
			if err := l.saveCursor(state); err != nil {
				return err
			}
		}
	}
	return nil
}

// acknowledged is how many deliveries at the start of the page read with
// state.Cursor the local server has acknowledged: state.Acked when the
// page starts as the state says, else none.
func (l *listener) acknowledged(state cursorState, items []delivery) int {
	n := state.Acked
	if n == 0 {
		return 0
	}
	if n > len(items) || items[n-1].ID != state.LastID {
		l.cfg.Logger.Warn("the page does not start as the cursor file says (its deliveries expired?); forwarding all of it",
			"cursor_file", l.cfg.CursorFile)
		return 0
	}
	return n
}

// retryAfter is a 429's Retry-After.
type retryAfter time.Duration

func (r retryAfter) Error() string {
	return "rate limited: retry after " + time.Duration(r).String()
}

// read reads the page after cursor, waiting for one: its deliveries'
// bodies and the next cursor. A poll URL Sluice does not know, or a
// cursor it did not give, is errListenStop; other failures are worth
// retrying.
func (l *listener) read(ctx context.Context, cursor string) ([]delivery, string, error) {
	u := *l.pollURL
	q := url.Values{}
	q.Set("cursor", cursor)
	q.Set("limit", strconv.Itoa(l.cfg.Limit))
	q.Set("wait", strconv.Itoa(int(l.cfg.Wait/time.Second)))
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, "", fmt.Errorf("%w: make the poll request: %w", errListenStop, err)
	}
	res, err := l.poll.Do(req)
	if err != nil {
		return nil, "", fmt.Errorf("read poll URL: %w", transportErr(err))
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, 64<<20))
	if err != nil {
		return nil, "", fmt.Errorf("read poll URL's answer: %w", err)
	}
	switch {
	case res.StatusCode == http.StatusOK:
	case res.StatusCode == http.StatusNotFound:
		return nil, "", fmt.Errorf("%w: %s answers 404: no poll endpoint has this URL; it is mistyped, "+
			"or the endpoint's secret was rotated, which changes its poll URL (GET /v1/endpoints/{id}/secret shows the new one)",
			errListenStop, l.redacted)
	case res.StatusCode == http.StatusUnprocessableEntity:
		return nil, "", fmt.Errorf("%w: the cursor in %s is not one this poll URL gave (%s); "+
			"give another --cursor-file, or delete it to start from the oldest delivery Sluice keeps",
			errListenStop, l.cfg.CursorFile, problemDetail(body))
	case res.StatusCode == http.StatusTooManyRequests:
		secs, _ := strconv.Atoi(res.Header.Get("Retry-After"))
		return nil, "", retryAfter(time.Duration(secs) * time.Second)
	case res.StatusCode >= 500:
		return nil, "", fmt.Errorf("sluice answers %d: %s", res.StatusCode, problemDetail(body))
	default:
		return nil, "", fmt.Errorf("%w: %s answers %d: %s", errListenStop, l.redacted, res.StatusCode, problemDetail(body))
	}
	var page struct {
		Data       []json.RawMessage `json:"data"`
		NextCursor string            `json:"next_cursor"`
	}
	notPoll := fmt.Errorf("%w: %s does not answer as a poll URL does (is it one?): %.200q", errListenStop, l.redacted, body)
	if err := json.Unmarshal(body, &page); err != nil || page.NextCursor == "" {
		return nil, "", notPoll
	}
	items := make([]delivery, len(page.Data))
	for i, raw := range page.Data {
		items[i].Body = raw
		if err := json.Unmarshal(raw, &items[i]); err != nil || items[i].ID == "" {
			return nil, "", notPoll
		}
	}
	return items, page.NextCursor, nil
}

// problemDetail is what a problem+json answer says, or its first bytes.
func problemDetail(body []byte) string {
	var p struct {
		Title  string `json:"title"`
		Detail string `json:"detail"`
	}
	if json.Unmarshal(body, &p) == nil && p.Title != "" {
		return strings.TrimSuffix(p.Title+": "+p.Detail, ": ")
	}
	return fmt.Sprintf("%.200q", body)
}

// forward posts one delivery to the local server until it answers 2xx,
// waiting Backoff between tries, then runs ack (which keeps the place)
// and prints its line; false when ctx ended first. ack runs as soon as
// the 2xx status is read, before anything else, so that a kill in
// between, which sends the delivery again, is as unlikely as can be.
func (l *listener) forward(ctx context.Context, d delivery, ack func() error) (bool, error) {
	for failures := 1; ; failures++ {
		status, latency, err := l.post(ctx, d, ack)
		if errors.Is(err, errAck) {
			return false, err
		}
		if err == nil && status >= 200 && status < 300 {
			_, _ = fmt.Fprintf(l.cfg.Out, "%s %s %d %s\n", d.Type, d.ID, status, latency.Round(100*time.Microsecond))
			return true, nil
		}
		if ctx.Err() != nil {
			return false, nil
		}
		wait := l.cfg.Backoff(failures)
		var op *net.OpError
		switch {
		case errors.As(err, &op) && op.Op == "dial":
			l.cfg.Logger.Warn("the local server is unreachable: is it running? retrying", "forward_to", l.cfg.ForwardTo,
				"type", d.Type, "id", d.ID, "err", err, "in", wait)
		case err != nil:
			l.cfg.Logger.Warn("posting to the local server failed; retrying", "forward_to", l.cfg.ForwardTo,
				"type", d.Type, "id", d.ID, "err", err, "in", wait)
		default:
			l.cfg.Logger.Warn("the local server did not acknowledge a delivery; retrying", "forward_to", l.cfg.ForwardTo,
				"type", d.Type, "id", d.ID, "status", status, "latency", latency, "in", wait)
		}
		pause(ctx, wait)
	}
}

// errAck marks a failure of forward's ack: the place could not be kept.
var errAck = errors.New("keep the place")

// post makes one try: body and the webhook-* headers, signed now, as
// Sluice's send stage makes them. On a 2xx it runs ack before it reads
// the answer's body.
func (l *listener) post(ctx context.Context, d delivery, ack func() error) (int, time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, l.cfg.ForwardTo, bytes.NewReader(d.Body))
	if err != nil {
		return 0, 0, fmt.Errorf("make the local request: %w", err)
	}
	start := time.Now()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", send.DefaultUserAgent)
	req.Header.Set("Webhook-Id", d.ID)
	req.Header.Set("Webhook-Timestamp", strconv.FormatInt(start.Unix(), 10))
	if l.keys != nil {
		req.Header.Set("Webhook-Signature", send.Sign(l.keys, d.ID, start.Unix(), d.Body))
	}
	res, err := l.local.Do(req)
	if err != nil {
		return 0, time.Since(start), fmt.Errorf("post to the local server: %w", transportErr(err))
	}
	defer res.Body.Close()
	latency := time.Since(start)
	if res.StatusCode >= 200 && res.StatusCode < 300 {
		if err := ack(); err != nil {
			return 0, latency, fmt.Errorf("%w: %w", errAck, err)
		}
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 1<<20))
	return res.StatusCode, latency, nil
}

// transportErr is an http.Client's error without the URL it names,
// which for a poll URL holds its token.
func transportErr(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// pause waits d or until ctx ends.
func pause(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// loadCursor reads the cursor file; none is the start.
func (l *listener) loadCursor() (cursorState, error) {
	raw, err := os.ReadFile(l.cfg.CursorFile)
	if errors.Is(err, os.ErrNotExist) {
		return cursorState{}, nil
	}
	if err != nil {
		return cursorState{}, fmt.Errorf("read the cursor file: %w", err)
	}
	var s cursorState
	if err := json.Unmarshal(raw, &s); err != nil || s.Acked < 0 {
		return cursorState{}, fmt.Errorf("%w: %s is not a cursor file sluice listen wrote; give another --cursor-file",
			errListenStop, l.cfg.CursorFile)
	}
	return s, nil
}

// saveCursor replaces the cursor file with s at once: a temporary file
// renamed over it, so a process killed at any point leaves the old state
// or the new. It is synced to disk only after the rename, which keeps
// the moment between the local server's 2xx and the new state short.
func (l *listener) saveCursor(s cursorState) error {
	dir := filepath.Dir(l.cfg.CursorFile)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("make the cursor file's directory: %w", err)
	}
	f, err := os.CreateTemp(dir, ".listen-*.tmp")
	if err != nil {
		return fmt.Errorf("write the cursor file: %w", err)
	}
	raw, _ := json.Marshal(s)
	_, err = f.Write(append(raw, '\n'))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), l.cfg.CursorFile)
	}
	if err != nil {
		_ = os.Remove(f.Name())
		return fmt.Errorf("write the cursor file: %w", err)
	}
	if f, err = os.Open(l.cfg.CursorFile); err == nil {
		err = f.Sync()
		_ = f.Close()
	}
	if err != nil {
		return fmt.Errorf("sync the cursor file: %w", err)
	}
	return nil
}
