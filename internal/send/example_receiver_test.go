package send_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/sluice-dev/sluice/internal/send"
)

// A receiver verifies Sluice's deliveries with the Standard Webhooks
// library, as docs/receiving.md shows: the handler below is the guide's Go
// snippet, and it accepts a delivery Sluice signed.
func Example_receiver() {
	secret := send.NewSecret() // the endpoint's secret: GET /v1/endpoints/{id}/secret

	// --- docs/receiving.md, Go -------------------------------------------
	wh, err := standardwebhooks.NewWebhook(secret) // "whsec_..."
	if err != nil {
		panic(err)
	}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20)) // the raw bytes, before any JSON decoding
		if err != nil {
			http.Error(w, "body too large", http.StatusRequestEntityTooLarge)
			return
		}
		if err := wh.Verify(body, r.Header); err != nil { // webhook-id, webhook-timestamp, webhook-signature
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		// Deduplicate on r.Header.Get("webhook-id"), queue the work, answer at once.
		w.WriteHeader(http.StatusNoContent)
	})
	// ----------------------------------------------------------------------

	srv := httptest.NewServer(handler)
	defer srv.Close()
	post := func(secrets ...string) int {
		var keys [][]byte
		for _, s := range secrets {
			k, err := send.Key(s)
			if err != nil {
				panic(err)
			}
			keys = append(keys, k)
		}
		id, now := "01936f0e-8c4b-7d2a-9f1e-3b5c7d9e1f20", time.Now().Unix()
		body := `{"id":"` + id + `","type":"order.created","timestamp":"2026-11-24T10:00:00Z","data":{"order":42}}`
		req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("webhook-id", id)
		req.Header.Set("webhook-timestamp", strconv.FormatInt(now, 10))
		req.Header.Set("webhook-signature", send.Sign(keys, id, now, []byte(body)))
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	fmt.Println("signed with the secret:", post(secret))
	fmt.Println("during a rotation (new and old secret):", post(send.NewSecret(), secret))
	fmt.Println("signed with another secret:", post(send.NewSecret()))
	// Output:
	// signed with the secret: 204
	// during a rotation (new and old secret): 204
	// signed with another secret: 401
}
