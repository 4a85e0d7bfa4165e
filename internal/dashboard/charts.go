package dashboard

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/control"
	"github.com/sluice-dev/sluice/internal/flow"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/web"
)

// chartRange is a time range of an endpoint's charts: n buckets of length
// bucket, the last one holding now.
type chartRange struct {
	id, name, per string
	bucket        time.Duration
	n, tickEvery  int
}

// chartRanges are the endpoint page's charts: the last hour per minute and
// the last day per half hour.
var chartRanges = []chartRange{
	{id: "hour", name: "Last hour", per: "minute", bucket: time.Minute, n: 60, tickEvery: 15},
	{id: "day", name: "Last 24 hours", per: "half hour", bucket: 30 * time.Minute, n: 48, tickEvery: 12},
}

// window is the range's [since, until) at now: whole buckets, the last
// one the bucket now is in.
func (cr chartRange) window(now time.Time) (since, until time.Time) {
	until = now.UTC().Truncate(cr.bucket).Add(cr.bucket)
	return until.Add(-time.Duration(cr.n) * cr.bucket), until
}

// attemptCharts are the charts at now of an endpoint of who's scope, one
// query per range.
func (d *Dashboard) attemptCharts(ctx context.Context, who control.Caller, endpointID uuid.UUID, now time.Time) ([]web.AttemptChart, error) {
	out := make([]web.AttemptChart, 0, len(chartRanges))
	for _, cr := range chartRanges {
		since, until := cr.window(now)
		rows, err := d.ctl.AttemptStats(ctx, who, endpointID, since, until, cr.bucket)
		if err != nil {
			return nil, err
		}
		out = append(out, web.AttemptChart{
			ID: cr.id, Name: cr.name, Per: cr.per, Bucket: cr.bucket, TickEvery: cr.tickEvery, Now: now,
			Buckets: fillBuckets(since, cr.bucket, cr.n, rows),
		})
	}
	return out, nil
}

// fillBuckets lays rows (buckets with attempts, as the store returns them)
// out as all n buckets from since, empty ones included.
func fillBuckets(since time.Time, bucket time.Duration, n int, rows []sluice.AttemptBucket) []sluice.AttemptBucket {
	out := make([]sluice.AttemptBucket, n)
	for i := range out {
		out[i].Start = since.Add(time.Duration(i) * bucket)
	}
	for _, r := range rows {
		i := int(r.Start.Sub(since) / bucket)
		if i >= 0 && i < n {
			r.Start = out[i].Start
			out[i] = r
		}
	}
	return out
}

// rateChart is an adaptive endpoint's effective rate over the hour up to
// now (flow.RateCurve, in 30 s steps), its curve drawn from the
// endpoint's creation when that is within the hour; nil for an endpoint
// whose rate limit is not adaptive. ep is in who's scope.
func (d *Dashboard) rateChart(ctx context.Context, who control.Caller, ep sluice.Endpoint, now time.Time) (*web.RateChart, error) {
	if ep.RateLimit == nil || !ep.RateLimit.Adaptive {
		return nil, nil
	}
	until := now.UTC()
	since := until.Add(-time.Hour)
	from := since
	if ep.CreatedAt.After(from) && ep.CreatedAt.Before(until) {
		from = ep.CreatedAt.UTC()
	}
	slowdowns, err := d.ctl.EffectiveRateChanges(ctx, who, ep.ID, from)
	if err != nil {
		return nil, err
	}
	l := flow.LimitOf(*ep.RateLimit)
	return &web.RateChart{Since: since, Until: until, Configured: l.Configured,
		Points: flow.RateCurve(slowdowns, l, from, until, 30*time.Second)}, nil
}
