package cost

// Prices are us-east-1 list prices in USD, as published (see Sources).
type Prices struct {
	// DynamoDB on-demand, per million request units.
	DynamoDBWriteMillion float64
	DynamoDBReadMillion  float64
	// SQS standard queue, per million requests (first 100 billion/month).
	SQSMillion float64
	// Lambda arm64: per GB-second (first 7.5 billion GB-s/month) and per
	// million requests.
	LambdaGBSecond       float64
	LambdaRequestMillion float64
	// EventBridge custom events, per million events published.
	EventBridgeMillion float64
	// Step Functions Standard, per 1,000 state transitions.
	StepFunctionsThousand float64
}

// ListPrices are the prices docs/cost-model.md cites (checked
// 2026-11-29 against the sources named there; free tiers ignored).
var ListPrices = Prices{
	DynamoDBWriteMillion:  0.625,
	DynamoDBReadMillion:   0.125,
	SQSMillion:            0.40,
	LambdaGBSecond:        0.0000133334,
	LambdaRequestMillion:  0.20,
	EventBridgeMillion:    1.00,
	StepFunctionsThousand: 0.025,
}

// Usage is what a workload consumed.
type Usage struct {
	WriteUnits, ReadUnits float64
	SQSRequests           float64
	LambdaRequests        float64
	LambdaGBSeconds       float64
	Events                float64
	StateTransitions      float64
}

// Cost is the price of u at p, in USD.
func (p Prices) Cost(u Usage) float64 {
	return u.WriteUnits*p.DynamoDBWriteMillion/1e6 + u.ReadUnits*p.DynamoDBReadMillion/1e6 +
		u.SQSRequests*p.SQSMillion/1e6 + u.LambdaRequests*p.LambdaRequestMillion/1e6 +
		u.LambdaGBSeconds*p.LambdaGBSecond + u.Events*p.EventBridgeMillion/1e6 +
		u.StateTransitions*p.StepFunctionsThousand/1e3
}

// Scale multiplies every figure of u by f.
func (u Usage) Scale(f float64) Usage {
	return Usage{u.WriteUnits * f, u.ReadUnits * f, u.SQSRequests * f, u.LambdaRequests * f,
		u.LambdaGBSeconds * f, u.Events * f, u.StateTransitions * f}
}

// StepFunctionsPollLoop is the usage of the same monitoring done by a
// Step Functions Standard execution per change, the loop
//
//	Wait (poll interval) → Task (Lambda: one signed CMS poll) → Choice (terminal?) → back to Wait
//
// ending in a Succeed state: 3 state transitions per poll plus 1, one
// Lambda request per poll of perPollGBSeconds, and the same intake and
// terminal events as localeflow (events per change). The execution state
// lives in Step Functions, so the loop writes no DynamoDB items; it is
// started from the bus (no SQS).
func StepFunctionsPollLoop(polls, eventsPerChange, perPollGBSeconds float64) Usage {
	return Usage{
		StateTransitions: 3*polls + 1,
		LambdaRequests:   polls,
		LambdaGBSeconds:  polls * perPollGBSeconds,
		Events:           eventsPerChange,
	}
}
