// A github.com/Azure/go-amqp receiver that attaches with source filters, run by
// tests/interop/test_interop_go.py against filtex-broker.
//
//	filtered_receive HOST:PORT ADDRESS COUNT FILTERS_JSON [--send-shapes]
//
// FILTERS_JSON is a list of {"key", "descriptor", "value"} objects (the
// descriptor a symbol as a JSON string or a ulong code as a JSON number), turned
// into the library's own filter options: the JMS selector with
// NewSelectorFilter, every other filter with NewLinkFilter(key, code, value).
// go-amqp has no way to give a symbolic descriptor other than the key itself
// (code 0 means "the key is the descriptor"), so a symbolic descriptor must
// equal its key. The receiver takes COUNT messages, accepting each, and prints
// one JSON object on stdout: {"received": [...], "echoed": {...}}, or
// {"refused": {...}} with the attach error as go-amqp returns it.
//
// With --send-shapes it first sends six messages encoded by go-amqp (see
// sendShapes), so the broker evaluates filters on another encoder's bytes.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/Azure/go-amqp"
)

type filterSpec struct {
	Key        string          `json:"key"`
	Descriptor json.RawMessage `json:"descriptor"`
	Value      any             `json:"value"`
}

const (
	selectorName = "apache.org:selector-filter:string"
	selectorCode = uint64(0x0000468C00000004)
)

type received struct {
	Body       any            `json:"body"`
	Properties map[string]any `json:"properties"`
}

type refusal struct {
	Type        string         `json:"type"`
	Message     string         `json:"message"`
	Condition   string         `json:"condition"`
	Description string         `json:"description"`
	Info        map[string]any `json:"info"`
}

type result struct {
	Received []received     `json:"received,omitempty"`
	Echoed   map[string]any `json:"echoed,omitempty"`
	Refused  *refusal       `json:"refused,omitempty"`
}

func main() {
	sendFirst := len(os.Args) == 6 && os.Args[5] == "--send-shapes"
	if len(os.Args) != 5 && !sendFirst {
		fail("usage: filtered_receive HOST:PORT ADDRESS COUNT FILTERS_JSON [--send-shapes]")
	}
	count, err := strconv.Atoi(os.Args[3])
	if err != nil {
		fail("COUNT: " + err.Error())
	}
	var specs []filterSpec
	decoder := json.NewDecoder(strings.NewReader(os.Args[4]))
	decoder.UseNumber()
	if err := decoder.Decode(&specs); err != nil {
		fail("FILTERS_JSON: " + err.Error())
	}
	options, err := filters(specs)
	if err != nil {
		fail("FILTERS_JSON: " + err.Error())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := run(ctx, os.Args[1], os.Args[2], count, specs, options, sendFirst)
	if err != nil {
		fail(err.Error())
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		fail(err.Error())
	}
}

func fail(message string) {
	fmt.Fprintln(os.Stderr, message)
	os.Exit(2)
}

func filters(specs []filterSpec) ([]amqp.LinkFilter, error) {
	var options []amqp.LinkFilter
	for _, spec := range specs {
		var code uint64
		var name string
		if err := json.Unmarshal(spec.Descriptor, &code); err != nil {
			if err := json.Unmarshal(spec.Descriptor, &name); err != nil {
				return nil, fmt.Errorf("descriptor %s: neither a symbol nor a code", spec.Descriptor)
			}
			if name != spec.Key {
				return nil, fmt.Errorf("go-amqp sends a symbolic descriptor only as the key itself: %q != %q", name, spec.Key)
			}
		}
		spec.Value = native(spec.Value)
		selector, isString := spec.Value.(string)
		if spec.Key == selectorName && code == selectorCode && isString {
			options = append(options, amqp.NewSelectorFilter(selector))
		} else {
			options = append(options, amqp.NewLinkFilter(spec.Key, code, spec.Value))
		}
	}
	return options, nil
}

// native gives JSON numbers the Go types a program would use: a whole number
// is an int64 (go-amqp encodes it as a long), any other a float64 (a double).
func native(value any) any {
	switch v := value.(type) {
	case json.Number:
		if i, err := v.Int64(); err == nil {
			return i
		}
		f, _ := v.Float64()
		return f
	case map[string]any:
		for key, item := range v {
			v[key] = native(item)
		}
	case []any:
		for i, item := range v {
			v[i] = native(item)
		}
	}
	return value
}

// sendShapes sends n = 0..5: body n; header priority n; properties message-id
// ulong n+1, subject "order.<n>", creation-time 1700000000000+n ms;
// application properties colour (red for odd n), n (long), n32 (int),
// small (byte) and f (float n+0.5).
func sendShapes(ctx context.Context, session *amqp.Session, address string) error {
	sender, err := session.NewSender(ctx, address, nil)
	if err != nil {
		return err
	}
	for n := 0; n < 6; n++ {
		colour, subject := "blue", fmt.Sprintf("order.%d", n)
		if n%2 == 1 {
			colour = "red"
		}
		created := time.UnixMilli(1700000000000 + int64(n))
		message := &amqp.Message{
			Header: &amqp.MessageHeader{Priority: uint8(n)},
			Properties: &amqp.MessageProperties{
				MessageID: uint64(n + 1), Subject: &subject, CreationTime: &created},
			ApplicationProperties: map[string]any{"colour": colour, "n": int64(n),
				"n32": int32(n), "small": int8(n), "f": float32(n) + 0.5},
			Value: int64(n),
		}
		if err := sender.Send(ctx, message, nil); err != nil {
			return err
		}
	}
	return sender.Close(ctx)
}

func run(ctx context.Context, hostPort, address string, count int, specs []filterSpec,
	options []amqp.LinkFilter, sendFirst bool) (*result, error) {
	conn, err := amqp.Dial(ctx, "amqp://"+hostPort, &amqp.ConnOptions{
		SASLType: amqp.SASLTypeAnonymous(), ContainerID: "go-amqp-interop"})
	if err != nil {
		return nil, fmt.Errorf("dial: %w", err)
	}
	defer conn.Close()
	session, err := conn.NewSession(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("session: %w", err)
	}
	if sendFirst {
		if err := sendShapes(ctx, session, address); err != nil {
			return nil, fmt.Errorf("send: %w", err)
		}
	}
	receiver, err := session.NewReceiver(ctx, address, &amqp.ReceiverOptions{
		Credit: 10, Filters: options})
	if err != nil {
		return refused(err)
	}
	out := &result{Received: []received{}, Echoed: map[string]any{}}
	for _, spec := range specs {
		out.Echoed[spec.Key] = receiver.LinkSourceFilterValue(spec.Key)
	}
	for len(out.Received) < count {
		message, err := receiver.Receive(ctx, nil)
		if err != nil {
			return nil, fmt.Errorf("receive after %v: %w", out.Received, err)
		}
		if err := receiver.AcceptMessage(ctx, message); err != nil {
			return nil, fmt.Errorf("accept: %w", err)
		}
		out.Received = append(out.Received, received{
			Body: message.Value, Properties: message.ApplicationProperties})
	}
	if err := receiver.Close(ctx); err != nil {
		return nil, fmt.Errorf("close: %w", err)
	}
	return out, nil
}

// refused describes a failed attach; only an *amqp.Error (the peer's detach) is a refusal.
func refused(err error) (*result, error) {
	var amqpErr *amqp.Error
	if !errors.As(err, &amqpErr) {
		return nil, fmt.Errorf("attach failed without an AMQP error (%T): %w", err, err)
	}
	info := map[string]any{}
	for key, value := range amqpErr.Info {
		info[key] = fmt.Sprint(value) // a symbol prints as its text
	}
	return &result{Refused: &refusal{
		Type: fmt.Sprintf("%T", err), Message: err.Error(),
		Condition: string(amqpErr.Condition), Description: amqpErr.Description, Info: info}}, nil
}
