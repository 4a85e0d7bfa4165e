// Command sluice-healthcheck GETs a URL (default
// http://127.0.0.1:8080/healthz) and exits 0 on a 2xx answer within 3
// seconds, 1 otherwise. It is the container health check of Sluice's
// image (Dockerfile, docker-compose.yml), which has no shell and no curl.
package main

import (
	"fmt"
	"net/http"
	"os"
	"time"
)

func main() {
	url := "http://127.0.0.1:8080/healthz"
	if len(os.Args) > 1 {
		url = os.Args[1]
	}
	client := &http.Client{Timeout: 3 * time.Second}
	res, err := client.Get(url)
	if err != nil {
		fmt.Fprintln(os.Stderr, "sluice-healthcheck:", err)
		os.Exit(1)
	}
	res.Body.Close()
	if res.StatusCode < 200 || res.StatusCode > 299 {
		fmt.Fprintf(os.Stderr, "sluice-healthcheck: %s answered %s\n", url, res.Status)
		os.Exit(1)
	}
}
