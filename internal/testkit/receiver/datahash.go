package receiver

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
)

// dataField is what precedes a Standard Webhooks body's data, the payload.
var dataField = []byte(`,"data":`)

// HashData reads a webhook body from r without holding it, and returns its
// size and the SHA-256 of what follows its "data" key: the payload, and the
// body's closing brace. Large bodies are checked this way.
func HashData(r io.Reader) (size int64, sum [sha256.Size]byte, err error) {
	br := bufio.NewReaderSize(r, 4<<10)
	head, _ := br.Peek(512)
	at := bytes.Index(head, dataField)
	if at < 0 {
		return 0, sum, errors.New("no data in the body's first 512 bytes")
	}
	_, _ = br.Discard(at + len(dataField))
	h := sha256.New()
	n, err := io.Copy(h, br)
	if err != nil {
		return 0, sum, fmt.Errorf("read the body: %w", err)
	}
	return n + int64(at+len(dataField)), [sha256.Size]byte(h.Sum(nil)), nil
}
