package sluice

// Destination kinds: an endpoint with a destination delivers to a message
// broker instead of an HTTP URL (docs/destinations.md).
const (
	DestinationRedis = "redis" // Redis Streams: XADD to Stream
	DestinationNATS  = "nats"  // NATS JetStream: a publish to Subject, acknowledged by its stream
	DestinationAMQP  = "amqp"  // AMQP 0-9-1 (RabbitMQ): a confirmed, mandatory publish to Exchange
)

// DestinationKinds are the destination kinds, in the order the API lists them.
var DestinationKinds = []string{DestinationRedis, DestinationNATS, DestinationAMQP}

// Destination is an endpoint's broker destination (the delivery option
// destination). URL is shown and stored without its password: the whole
// URL is sealed apart (endpoints.destination_url_enc) and opened only to
// deliver.
type Destination struct {
	Type string `json:"type"`
	URL  string `json:"url"`
	// PasswordSet reports whether the sealed URL carries a password.
	PasswordSet bool `json:"password_set,omitempty"`

	Stream string `json:"stream,omitempty"`  // redis
	MaxLen int64  `json:"max_len,omitempty"` // redis: XADD MAXLEN ~ max_len; 0: no trimming

	Subject string `json:"subject,omitempty"` // nats

	Exchange   string `json:"exchange,omitempty"`    // amqp ("" is the default exchange)
	RoutingKey string `json:"routing_key,omitempty"` // amqp

	// FullURL is the URL with its credentials: as a request sent it (nil
	// when it sent none, keeping the stored one) and as a worker opened it.
	FullURL []byte `json:"-"`
}

// Limits on a destination's names.
const (
	MaxDestinationName = 255
	MaxStreamLength    = 1 << 40
)
