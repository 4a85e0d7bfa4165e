package store

// EndpointsNeedingDispatchSQL is the sweeper's query, for plan tests.
const EndpointsNeedingDispatchSQL = endpointsNeedingDispatchSQL
