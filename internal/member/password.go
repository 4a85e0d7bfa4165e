package member

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"

	"golang.org/x/crypto/argon2"

	"github.com/sluice-dev/sluice/internal/sluice"
)

// Password rules.
const (
	MinPasswordLength = 12  // characters
	MaxPasswordLength = 256 // characters: hashing cost is bounded by the input too
)

// ValidatePassword checks a new password: MinPasswordLength to
// MaxPasswordLength characters of valid UTF-8.
func ValidatePassword(password string) error {
	v := &sluice.ValidationError{}
	switch n := utf8.RuneCountInString(password); {
	case !utf8.ValidString(password):
		v.Add("password", "must be valid text")
	case n < MinPasswordLength:
		v.Add("password", "must be at least %d characters", MinPasswordLength)
	case n > MaxPasswordLength:
		v.Add("password", "must be at most %d characters", MaxPasswordLength)
	}
	return v.Err()
}

// argon2id parameters: OWASP's first recommended set (19 MiB, two passes,
// one lane), a sign-in costs tens of milliseconds. They are written into
// each hash, so hashes made with other parameters keep verifying.
const (
	argonMemory  = 19 * 1024 // KiB
	argonTime    = 2
	argonThreads = 1
	argonKeyLen  = 32
	argonSaltLen = 16
)

var b64 = base64.RawStdEncoding

// HashPassword returns the argon2id hash of password in the PHC string
// format: $argon2id$v=19$m=19456,t=2,p=1$<salt>$<hash>.
func HashPassword(password string) string {
	salt := make([]byte, argonSaltLen)
	_, _ = rand.Read(salt) // never fails
	key := argon2.IDKey([]byte(password), salt, argonTime, argonMemory, argonThreads, argonKeyLen)
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s",
		argon2.Version, argonMemory, argonTime, argonThreads, b64.EncodeToString(salt), b64.EncodeToString(key))
}

// errBadHash is a stored hash that is not one HashPassword makes.
var errBadHash = errors.New("member: malformed password hash")

// CheckPassword reports whether password matches hash (HashPassword). An
// empty hash (no member, or one who has not set a password) or a malformed
// one matches nothing, but costs a hash all the same, of the decoy made
// with the same parameters, so that a sign-in's time does not tell which
// addresses have accounts.
func CheckPassword(hash, password string) bool {
	ok, err := checkPassword(hash, password)
	if err != nil {
		_, _ = checkPassword(decoy(), password)
		return false
	}
	return ok
}

// decoy is the hash an address without a password is checked against,
// made the first time one is.
var decoy = sync.OnceValue(func() string { return HashPassword("decoy password that no one has") })

func checkPassword(hash, password string) (bool, error) {
	parts := strings.Split(hash, "$")
	if len(parts) != 6 || parts[1] != "argon2id" {
		return false, errBadHash
	}
	var version int
	if _, err := fmt.Sscanf(parts[2], "v=%d", &version); err != nil || version != argon2.Version {
		return false, errBadHash
	}
	var memory, time uint32
	var threads uint8
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &memory, &time, &threads); err != nil ||
		memory == 0 || memory > 1<<20 || time == 0 || time > 16 || threads == 0 {
		return false, errBadHash
	}
	salt, err := b64.DecodeString(parts[4])
	if err != nil {
		return false, errBadHash
	}
	want, err := b64.DecodeString(parts[5])
	if err != nil || len(want) == 0 {
		return false, errBadHash
	}
	got := argon2.IDKey([]byte(password), salt, time, memory, threads, uint32(len(want)))
	return subtle.ConstantTimeCompare(got, want) == 1, nil
}
