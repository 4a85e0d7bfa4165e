// The build of Sluice that is running, for `sluice version`, GET /healthz
// and the ready line of the log.

package sluice

import "runtime/debug"

// Version is set at build time:
//
//	go build -ldflags "-X github.com/sluice-dev/sluice/internal/sluice.Version=v1.2.3" ./cmd/sluice
//
// (make build and the Dockerfile do). Empty means VersionString falls back to the
// version control information Go records in the binary.
var Version = ""

// String is Version, or "dev-<commit>" (with "-dirty" for uncommitted
// changes) from the build information, or "dev".
func VersionString() string {
	if Version != "" {
		return Version
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "dev"
	}
	var rev, dirty string
	for _, s := range info.Settings {
		switch {
		case s.Key == "vcs.revision" && len(s.Value) >= 12:
			rev = s.Value[:12]
		case s.Key == "vcs.modified" && s.Value == "true":
			dirty = "-dirty"
		}
	}
	if rev == "" {
		return "dev"
	}
	return "dev-" + rev + dirty
}
