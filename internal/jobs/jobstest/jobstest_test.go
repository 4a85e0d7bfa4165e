package jobstest_test

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestOnlyPackageJobsNamesRiversTables: no Go file outside internal/jobs
// (this package included there) names River's job table. Tests read and
// change jobs through this package; the product through package jobs.
func TestOnlyPackageJobsNamesRiversTables(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..", "..")
	var named []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel == "internal/jobs" || strings.HasPrefix(d.Name(), ".") && rel != "." {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if bytes.Contains(src, []byte("river_job")) {
			named = append(named, rel)
		}
		return nil
	})
	require.NoError(t, err)
	require.Empty(t, named, "these name river_job: use package jobs, or jobstest in a test")
}
