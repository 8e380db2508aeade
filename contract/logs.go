package contract

// LogRemoteCalls is the "msg" of the per-invocation remote-call document
// (internal/remotecall) that the stack's slowest-CMS-calls query selects.
const LogRemoteCalls = "remote calls"
