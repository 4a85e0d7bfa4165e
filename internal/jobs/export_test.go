package jobs

// The hand-written statements, for plan tests.
var (
	ReplaceSQL                  = replaceSQL
	EndpointsNeedingDispatchSQL = endpointsNeedingDispatchSQL
	LiveDispatchSQL             = liveDispatchSQL
)
