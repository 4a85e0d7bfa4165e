// Package client is a typed Go client for Sluice's HTTP API, generated
// from openapi.yaml by oapi-codegen (`make generate`, checked by `make
// check`), so it always matches the server's contract.
//
// NewClientWithResponses returns a client whose methods, one per
// operation, decode each documented answer into a typed field (JSON201,
// JSON422, ...). WithAPIKey adds the tenant's API key to every request:
//
//	c, err := client.NewClientWithResponses("https://sluice.example.com",
//		client.WithAPIKey(os.Getenv("SLUICE_API_KEY")))
//	if err != nil {
//		return err
//	}
//	res, err := c.CreateEventWithResponse(ctx, nil, client.CreateEventJSONRequestBody{
//		Type:    "order.created",
//		Payload: map[string]any{"order_id": 1042},
//	})
//	if err != nil {
//		return err
//	}
//	if res.JSON202 == nil { // a problem: res.ApplicationProblemJSON4XX, res.Body
//		return fmt.Errorf("post event: %s", res.Status())
//	}
//
// The package's Example shows a whole round trip: an endpoint, its
// subscription, an event and its delivery.
package client
