package httpapi

import (
	"mime"
	"net/http"
	"strings"
)

// typeUnsupportedMediaType is the problem of a body that is not JSON.
const typeUnsupportedMediaType = problemBase + "unsupported-media-type"

// requireJSON answers 415 to a POST, PUT or PATCH that carries a body whose
// Content-Type is not application/json (parameters such as charset
// allowed) or application/<anything>+json. A request without a body, such
// as POST …/circuit/close, needs no Content-Type.
func (a *API) requireJSON(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodPost, http.MethodPut, http.MethodPatch:
			if r.ContentLength != 0 && !isJSON(r.Header.Get("Content-Type")) {
				writeProblem(w, &Problem{Type: typeUnsupportedMediaType, Title: "Unsupported media type",
					Status: http.StatusUnsupportedMediaType,
					Detail: "send the body as JSON, with \"Content-Type: application/json\""})
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

func isJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return false
	}
	sub, ok := strings.CutPrefix(mt, "application/")
	return ok && (sub == "json" || strings.HasSuffix(sub, "+json"))
}
