package control_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/control"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/testkit/testca"
)

// options is an OptionsInput of JSON texts.
func options(kv ...string) control.OptionsInput {
	out := control.OptionsInput{}
	for i := 0; i < len(kv); i += 2 {
		out[kv[i]] = json.RawMessage(kv[i+1])
	}
	return out
}

func TestDeliveryOptions(t *testing.T) {
	t.Parallel()
	b := setupEndpoints(t)
	ctx := context.Background()

	plain := b.create(t, b.owner, control.EndpointInput{}).Endpoint
	require.True(t, plain.DeliveryOptions.IsZero(), "no option: the server's defaults")

	ep := b.create(t, b.owner, control.EndpointInput{Options: options(
		"timeout_seconds", "30", "retry_schedule", `["10s", "1m30s", "2h"]`)}).Endpoint
	require.Equal(t, 30, *ep.TimeoutSeconds)
	require.Equal(t, sluice.Schedule{10 * time.Second, 90 * time.Second, 2 * time.Hour}, ep.RetrySchedule)
	got, err := b.ctl.Endpoint(ctx, b.owner, ep.ID)
	require.NoError(t, err)
	require.Equal(t, ep.DeliveryOptions, got.DeliveryOptions, "read back as written")

	// A PATCH keeps the options it does not name and gives back to the
	// default those it sends as null; the audit entry names what changed.
	got, err = b.ctl.UpdateEndpoint(ctx, b.owner, ep.ID, control.EndpointInput{Options: options("timeout_seconds", "null")})
	require.NoError(t, err)
	require.Nil(t, got.TimeoutSeconds)
	require.Equal(t, ep.RetrySchedule, got.RetrySchedule)
	require.Equal(t, []string{"timeout_seconds"}, b.auditLog(t, b.owner)[0].Changed)
	got, err = b.ctl.UpdateEndpoint(ctx, b.owner, ep.ID, control.EndpointInput{Options: options("retry_schedule", "[]")})
	require.NoError(t, err)
	require.Equal(t, sluice.Schedule{}, got.RetrySchedule, "no retries: one attempt")
	require.Equal(t, []string{"retry_schedule"}, b.auditLog(t, b.owner)[0].Changed)
	got, err = b.ctl.UpdateEndpoint(ctx, b.owner, ep.ID, control.EndpointInput{Options: options("retry_schedule", "null")})
	require.NoError(t, err)
	require.True(t, got.DeliveryOptions.IsZero())
}

func TestDeliveryOptionsRefused(t *testing.T) {
	t.Parallel()
	b := setupEndpoints(t)
	ctx := context.Background()
	ep := b.create(t, b.owner, control.EndpointInput{Options: options("timeout_seconds", "5")}).Endpoint

	long := `["` + strings.Repeat(`1s", "`, sluice.MaxRetrySteps) + `1s"]`
	for name, tc := range map[string]struct{ field, value string }{
		"timeout zero":           {"timeout_seconds", "0"},
		"timeout over a minute":  {"timeout_seconds", "61"},
		"timeout fractional":     {"timeout_seconds", "1.5"},
		"timeout as text":        {"timeout_seconds", `"30"`},
		"schedule not a list":    {"retry_schedule", `"5s,1m"`},
		"schedule of numbers":    {"retry_schedule", `[5, 60]`},
		"schedule step bad":      {"retry_schedule", `["5s", "soon"]`},
		"schedule step zero":     {"retry_schedule", `["0s"]`},
		"schedule step negative": {"retry_schedule", `["-5s"]`},
		"schedule too long":      {"retry_schedule", long},
		"schedule over 7 days":   {"retry_schedule", `["100h", "69h"]`},
		"schedule step huge":     {"retry_schedule", `["2562047h", "2562047h"]`},
	} {
		in := control.EndpointInput{Options: options(tc.field, tc.value)}
		_, err := b.ctl.CreateEndpoint(ctx, b.owner, control.EndpointInput{URL: new("http://127.0.0.1:9/x"), Options: in.Options})
		require.Equal(t, []string{tc.field}, fields(t, err), name)
		_, err = b.ctl.UpdateEndpoint(ctx, b.owner, ep.ID, in)
		require.Equal(t, []string{tc.field}, fields(t, err), name)
	}
	got, err := b.ctl.Endpoint(ctx, b.owner, ep.ID)
	require.NoError(t, err)
	require.Equal(t, 5, *got.TimeoutSeconds, "a refused update changes nothing")
	_, err = b.ctl.UpdateEndpoint(ctx, b.owner, ep.ID, control.EndpointInput{Options: options("timeout", "5")})
	require.Equal(t, []string{"timeout"}, fields(t, err), "a name that is no option")
}

// A poll endpoint is read, never sent a request: the options that act on
// a request Sluice sends (auth, tls, an Ed25519 signature, a challenge)
// are refused, naming the field, on create and on update; the others are
// kept.
func TestPollEndpointOptionsRefused(t *testing.T) {
	t.Parallel()
	b := setupEndpoints(t)
	ctx := context.Background()
	ca := testca.New(t, "clients")
	cert := ca.Issue(t, testca.Options{CommonName: "poll-reader", Client: true})
	poll := control.EndpointInput{Delivery: new(sluice.DeliveryPoll)}
	ep := b.create(t, b.owner, poll).Endpoint

	for name, tc := range map[string]struct{ field, value string }{
		"auth":           {"auth", authJSON(t, nil)},
		"tls":            {"tls", tlsJSON(t, cert.PEM, cert.KeyPEM, "")},
		"signature v1a":  {"signature", `"v1a"`},
		"signature both": {"signature", `"v1,v1a"`},
		"challenge":      {"verification", `"challenge"`},
	} {
		in := control.EndpointInput{Delivery: poll.Delivery, Options: options(tc.field, tc.value)}
		_, err := b.ctl.CreateEndpoint(ctx, b.owner, in)
		require.Equal(t, []string{tc.field}, fields(t, err), name)
		_, err = b.ctl.UpdateEndpoint(ctx, b.owner, ep.ID, control.EndpointInput{Options: in.Options})
		require.Equal(t, []string{tc.field}, fields(t, err), name)
	}
	got, err := b.ctl.Endpoint(ctx, b.owner, ep.ID)
	require.NoError(t, err)
	require.True(t, got.DeliveryOptions.IsZero(), "a refused update changes nothing")

	// Every refusal at once, each naming its field.
	_, err = b.ctl.CreateEndpoint(ctx, b.owner, control.EndpointInput{Delivery: poll.Delivery, Options: options(
		"auth", authJSON(t, nil), "tls", tlsJSON(t, cert.PEM, cert.KeyPEM, ""), "signature", `"v1a"`)})
	require.ElementsMatch(t, []string{"auth", "tls", "signature"}, fields(t, err))

	// What a poll endpoint may have: v1 (sluice listen signs with it) and
	// the options that are null by default.
	got, err = b.ctl.UpdateEndpoint(ctx, b.owner, ep.ID, control.EndpointInput{Options: options(
		"signature", `"v1"`, "verification", `"none"`, "auth", "null", "tls", "null")})
	require.NoError(t, err)
	require.Equal(t, sluice.SignatureV1, *got.Signature)
	pushed := b.create(t, b.owner, control.EndpointInput{Options: options("signature", `"v1a"`, "auth", authJSON(t, nil))}).Endpoint
	require.True(t, pushed.SignsV1a(), "a push endpoint keeps them")
}
