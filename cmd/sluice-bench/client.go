package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
)

// Client calls Sluice's REST API as the benchmark tenant.
type Client struct {
	base string
	auth string
	http *http.Client
}

func newClient(base, apiKey string) *Client {
	return &Client{
		base: base,
		auth: "Bearer " + apiKey,
		http: newHTTPClient(),
	}
}

// newHTTPClient is the benchmark's client for posting: it keeps a
// connection for each of up to 256 concurrent senders.
func newHTTPClient() *http.Client {
	return &http.Client{
		Timeout: 60 * time.Second,
		Transport: &http.Transport{
			Proxy:               nil, // loopback only
			MaxIdleConns:        256,
			MaxIdleConnsPerHost: 256,
			IdleConnTimeout:     90 * time.Second,
		},
	}
}

// EventIn is one event as posted.
type EventIn struct {
	Type        string          `json:"type"`
	Payload     json.RawMessage `json:"payload"`
	Consumer    string          `json:"consumer,omitempty"`
	OrderingKey string          `json:"ordering_key,omitempty"`
}

// do sends body (raw JSON bytes, or a value to marshal, or nil) and expects
// status want; out, if not nil, receives the decoded response.
func (c *Client) do(ctx context.Context, method, path string, body any, want int, out any) error {
	var raw []byte
	switch b := body.(type) {
	case nil:
	case []byte:
		raw = b
	default:
		var err error
		if raw, err = json.Marshal(b); err != nil {
			return fmt.Errorf("%s %s: marshal the body: %w", method, path, err)
		}
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, bytes.NewReader(raw))
	if err != nil {
		return fmt.Errorf("%s %s: new request: %w", method, path, err)
	}
	req.Header.Set("Authorization", c.auth)
	if raw != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != want {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 2<<10))
		return fmt.Errorf("%s %s: status %d, want %d: %s", method, path, resp.StatusCode, want, msg)
	}
	if out == nil {
		_, err = io.Copy(io.Discard, resp.Body)
		if err != nil {
			return fmt.Errorf("%s %s: read the response: %w", method, path, err)
		}
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("%s %s: decode the response: %w", method, path, err)
	}
	return nil
}

// CreateEndpoint registers url with max_in_flight and returns its id.
func (c *Client) CreateEndpoint(ctx context.Context, url string, maxInFlight int) (string, error) {
	return c.CreateConsumerEndpoint(ctx, url, maxInFlight, "")
}

// CreateConsumerEndpoint is CreateEndpoint for an endpoint of a consumer
// (none when consumer is empty).
func (c *Client) CreateConsumerEndpoint(ctx context.Context, url string, maxInFlight int, consumer string) (string, error) {
	return c.CreateEndpointWith(ctx, url, maxInFlight, consumer, nil)
}

// CreateEndpointWith is CreateConsumerEndpoint with more of the endpoint's
// fields (ordering, rate_limit, ...), none when extra is nil.
func (c *Client) CreateEndpointWith(ctx context.Context, url string, maxInFlight int, consumer string, extra map[string]any) (string, error) {
	var ep struct {
		ID string `json:"id"`
	}
	body := map[string]any{"url": url, "max_in_flight": maxInFlight}
	if consumer != "" {
		body["consumer"] = consumer
	}
	for k, v := range extra {
		body[k] = v
	}
	err := c.do(ctx, http.MethodPost, "/v1/endpoints", body, http.StatusCreated, &ep)
	return ep.ID, err
}

// PutConsumer creates (or updates) a consumer.
func (c *Client) PutConsumer(ctx context.Context, uid string) error {
	err := c.do(ctx, http.MethodPut, "/v1/consumers/"+uid, map[string]any{"name": uid}, http.StatusCreated, nil)
	if err != nil {
		err = c.do(ctx, http.MethodPut, "/v1/consumers/"+uid, map[string]any{"name": uid}, http.StatusOK, nil)
	}
	return err
}

// Subscribe subscribes an endpoint to event types and returns the
// subscription's id.
func (c *Client) Subscribe(ctx context.Context, endpointID string, types ...string) (string, error) {
	var sub struct {
		ID string `json:"id"`
	}
	err := c.do(ctx, http.MethodPost, "/v1/subscriptions",
		map[string]any{"endpoint_id": endpointID, "event_types": types}, http.StatusCreated, &sub)
	return sub.ID, err
}

// SubscribeFiltered is Subscribe with a payload filter (none when f is
// nil).
func (c *Client) SubscribeFiltered(ctx context.Context, endpointID string, f json.RawMessage, types ...string) (string, error) {
	var sub struct {
		ID string `json:"id"`
	}
	body := map[string]any{"endpoint_id": endpointID, "event_types": types}
	if f != nil {
		body["filter"] = f
	}
	err := c.do(ctx, http.MethodPost, "/v1/subscriptions", body, http.StatusCreated, &sub)
	return sub.ID, err
}

// DeleteSubscription deletes a subscription.
func (c *Client) DeleteSubscription(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, "/v1/subscriptions/"+id, nil, http.StatusNoContent, nil)
}

// PostEvent posts one event, already marshalled.
func (c *Client) PostEvent(ctx context.Context, body []byte) error {
	return c.do(ctx, http.MethodPost, "/v1/events", body, http.StatusAccepted, nil)
}

// PostBatch posts a batch body ({"events": [...]}), already marshalled.
func (c *Client) PostBatch(ctx context.Context, body []byte) error {
	return c.do(ctx, http.MethodPost, "/v1/events/batch", body, http.StatusAccepted, nil)
}

// batchBody marshals events as a POST /v1/events/batch body.
func batchBody(events []EventIn) []byte {
	b, _ := json.Marshal(map[string][]EventIn{"events": events})
	return b
}

// eventBody marshals one event as a POST /v1/events body.
func eventBody(ev EventIn) []byte {
	b, _ := json.Marshal(ev)
	return b
}

// payload is a JSON object of about 200 bytes carrying sentNS (unix nanos
// when the event was posted; 0 when not measured) and a sequence number.
func payload(sentNS int64, seq int) json.RawMessage {
	b := make([]byte, 0, 224)
	b = append(b, `{"sent_ns":`...)
	b = strconv.AppendInt(b, sentNS, 10)
	b = append(b, `,"seq":`...)
	b = strconv.AppendInt(b, int64(seq), 10)
	b = append(b, `,"customer":"cus_`...)
	b = strconv.AppendInt(b, int64(100000+seq%900000), 10)
	b = append(b, `","amount":4200,"currency":"eur","note":"`...)
	for len(b) < 198 {
		b = append(b, 'x')
	}
	return append(b, `"}`...)
}
