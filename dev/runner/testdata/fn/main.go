// Command fn is a test Lambda function for the runner's aws-lambda-rie
// tests: it answers by the "mode" field of its payload.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
)

func main() {
	lambda.Start(func(_ context.Context, in json.RawMessage) (json.RawMessage, error) {
		var p struct {
			Mode string `json:"mode"`
		}
		_ = json.Unmarshal(in, &p)
		switch p.Mode {
		case "error":
			return nil, errors.New("handler failed")
		case "panic":
			panic("handler panicked")
		case "sleep":
			time.Sleep(10 * time.Second)
		}
		return in, nil
	})
}
