// Package web is the dashboard's HTML: templ components (the *.templ files
// and the *_templ.go code templ generates from them) and the static CSS,
// embedded in the binary. It renders what package dashboard hands it and
// knows nothing of HTTP, sessions or the database; every page that holds a
// form gets its CSRF token through Chrome.
package web

import (
	"embed"
	"io/fs"
)

//go:embed static
var static embed.FS

// StaticPrefix is the URL path under which Static is served.
const StaticPrefix = "/static/"

// FaviconPath is the dashboard's icon among the static files; browsers
// that ask for /favicon.ico get the same file.
const FaviconPath = StaticPrefix + "favicon.svg"

// Static returns the dashboard's static files (style.css, favicon.svg), to
// serve under StaticPrefix.
func Static() fs.FS {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the directory is embedded above
	}
	return sub
}
