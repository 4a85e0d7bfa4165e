package client_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"os"

	"github.com/sluice-dev/sluice/client"
)

// Register an endpoint, subscribe it to order events and post one, safely
// retried with an Idempotency-Key. The server's address and the tenant's
// API key come from the environment.
//
// (TestExample runs this against a real server.)
func Example() {
	ctx := context.Background()
	c, err := client.NewClientWithResponses(os.Getenv("SLUICE_URL"), client.WithAPIKey(os.Getenv("SLUICE_API_KEY")))
	if err != nil {
		log.Fatal(err)
	}

	ep, err := c.CreateEndpointWithResponse(ctx, client.CreateEndpointJSONRequestBody{
		URL:         ptr("https://hooks.example.com/orders"),
		Description: ptr("Order notifications"),
	})
	if err != nil {
		log.Fatal(err)
	}
	if ep.JSON201 == nil {
		log.Fatalf("create endpoint: %s: %s", ep.Status(), ep.Body)
	}
	fmt.Println("signing secret starts with", ep.JSON201.Secret[:6])

	sub, err := c.CreateSubscriptionWithResponse(ctx, client.CreateSubscriptionJSONRequestBody{
		EndpointID: ep.JSON201.ID,
		EventTypes: []string{"order.*"},
	})
	if err != nil {
		log.Fatal(err)
	}
	if sub.JSON201 == nil {
		log.Fatalf("subscribe: %s: %s", sub.Status(), sub.Body)
	}

	post := func(key string) *client.CreateEventResponse {
		ev, err := c.CreateEventWithResponse(ctx, &client.CreateEventParams{IdempotencyKey: &key},
			client.CreateEventJSONRequestBody{
				Type:    "order.created",
				Payload: map[string]any{"order_id": 1042, "total": "99.00"},
			})
		if err != nil {
			log.Fatal(err)
		}
		return ev
	}
	first := post("order-1042-created")
	if first.JSON202 == nil {
		log.Fatalf("post event: %s: %s", first.Status(), first.Body)
	}
	fmt.Println("accepted", first.JSON202.Type)
	// A retry with the same Idempotency-Key answers the first event.
	again := post("order-1042-created")
	fmt.Println("retry answered the same event:", again.JSON202.ID == first.JSON202.ID)

	// Problems decode too: sluice.* types are Sluice's own.
	bad, err := c.CreateEventWithResponse(ctx, nil, client.CreateEventJSONRequestBody{
		Type:    "sluice.endpoint.disabled",
		Payload: map[string]any{},
	})
	if err != nil {
		log.Fatal(err)
	}
	if p := bad.ApplicationProblemJSON422; p != nil {
		fmt.Println(p.Status, p.Title)
	}
	// Output is checked by TestExample.
}

// A problem decodes into the field of its status: a 422 names each field
// at fault, a 429 says when to try again. The client does not retry by
// itself.
//
// (TestExampleProblems runs this against a real server.)
func Example_problems() {
	ctx := context.Background()
	c, err := client.NewClientWithResponses(os.Getenv("SLUICE_URL"), client.WithAPIKey(os.Getenv("SLUICE_API_KEY")))
	if err != nil {
		log.Fatal(err)
	}

	ev, err := c.CreateEventWithResponse(ctx, nil, client.CreateEventJSONRequestBody{
		Type:    "order created",
		Payload: map[string]any{"order_id": 1042},
	})
	if err != nil {
		log.Fatal(err)
	}
	switch {
	case ev.JSON202 != nil:
		fmt.Println("accepted", ev.JSON202.ID)
	case ev.ApplicationProblemJSON422 != nil:
		for _, f := range *ev.ApplicationProblemJSON422.Errors {
			fmt.Printf("%s: %s\n", f.Field, f.Message)
		}
	case ev.StatusCode() == http.StatusTooManyRequests:
		fmt.Println("try again in", ev.HTTPResponse.Header.Get("Retry-After"), "seconds")
	default:
		fmt.Println(ev.Status(), string(ev.Body))
	}
}

func ptr[T any](v T) *T { return &v }
