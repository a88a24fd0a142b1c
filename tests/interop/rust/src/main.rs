//! A fe2o3-amqp receiver that attaches with source filters, run by
//! tests/interop/test_interop_rust.py against filtex-broker.
//!
//!     filtered_receive HOST:PORT ADDRESS COUNT FILTERS_JSON [--send-shapes]
//!
//! FILTERS_JSON is a list of {"key", "descriptor", "value"} objects; each goes
//! into the source with the crate's own `Source::builder().add_to_filter(key,
//! Described { descriptor, value })`, the descriptor a symbol (JSON string) or
//! a ulong code (JSON number); inside a value, {"described": [DESCRIPTOR, VALUE]}
//! is a nested described value (the members of a group filter). The receiver
//! takes COUNT messages, accepting each, and prints one JSON object on stdout:
//! {"received": [...], "echoed": {...}}, or {"refused": {...}} with the attach
//! error as fe2o3-amqp reports it. It connects without SASL (the crate's default
//! for a URL without credentials); the Go program uses SASL ANONYMOUS.
//!
//! With --send-shapes it first sends six messages encoded by fe2o3-amqp (see
//! `send_shapes`), so the broker evaluates filters on another encoder's bytes.

use std::process::ExitCode;
use std::time::Duration;

use fe2o3_amqp::link::ReceiverAttachError;
use fe2o3_amqp::session::SessionHandle;
use fe2o3_amqp::types::definitions;
use fe2o3_amqp::types::messaging::{
    ApplicationProperties, Body, Header, Message, Properties, Source,
};
use fe2o3_amqp::types::primitives::{OrderedMap, SimpleValue, Symbol, Timestamp, Value};
use fe2o3_amqp::{Connection, Receiver, Sender, Session};
use serde_amqp::described::Described;
use serde_amqp::descriptor::Descriptor;
use serde_json::{json, Map, Value as Json};

type Failure = String;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let send_first = args.len() == 6 && args[5] == "--send-shapes";
    if args.len() != 5 && !send_first {
        eprintln!("usage: filtered_receive HOST:PORT ADDRESS COUNT FILTERS_JSON [--send-shapes]");
        return ExitCode::from(2);
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let outcome = runtime.block_on(async {
        tokio::time::timeout(
            Duration::from_secs(20),
            run(&args[1], &args[2], &args[3], &args[4], send_first),
        )
        .await
        .unwrap_or_else(|_| Err("timed out after 20 s".to_string()))
    });
    match outcome {
        Ok(result) => {
            println!("{result}");
            ExitCode::SUCCESS
        }
        Err(failure) => {
            eprintln!("{failure}");
            ExitCode::from(2)
        }
    }
}

/// n = 0..5: body n; header priority n; properties message-id ulong n+1, subject
/// "order.<n>", creation-time 1700000000000+n ms; application properties colour
/// (red for odd n), n (long), n32 (int), small (byte) and f (float n+0.5).
async fn send_shapes(session: &mut SessionHandle<()>, address: &str) -> Result<(), Failure> {
    let mut sender = Sender::attach(session, "fe2o3-shapes", address)
        .await
        .map_err(|e| format!("sender: {e:?}"))?;
    for n in 0..6i64 {
        let colour = if n % 2 == 1 { "red" } else { "blue" };
        let message = Message::builder()
            .header(Header::builder().priority(n as u8).build())
            .properties(
                Properties::builder()
                    .message_id(n as u64 + 1)
                    .subject(format!("order.{n}"))
                    .creation_time(Timestamp::from_milliseconds(1_700_000_000_000 + n))
                    .build(),
            )
            .application_properties(
                ApplicationProperties::builder()
                    .insert("colour", colour)
                    .insert("n", SimpleValue::Long(n))
                    .insert("n32", SimpleValue::Int(n as i32))
                    .insert("small", SimpleValue::Byte(n as i8))
                    .insert("f", SimpleValue::Float((n as f32 + 0.5).into()))
                    .build(),
            )
            .value(n)
            .build();
        let outcome = sender
            .send(message)
            .await
            .map_err(|e| format!("send: {e:?}"))?;
        if !outcome.is_accepted() {
            return Err(format!("message {n} not accepted: {outcome:?}"));
        }
    }
    sender
        .close()
        .await
        .map_err(|e| format!("close sender: {e:?}"))
}

async fn run(
    host_port: &str,
    address: &str,
    count: &str,
    filters: &str,
    send_first: bool,
) -> Result<Json, Failure> {
    let count: usize = count.parse().map_err(|e| format!("COUNT: {e}"))?;
    let specs: Vec<Json> =
        serde_json::from_str(filters).map_err(|e| format!("FILTERS_JSON: {e}"))?;
    let mut source = Source::builder().address(address);
    let mut keys = Vec::new();
    for spec in &specs {
        let key = spec["key"]
            .as_str()
            .ok_or("a filter without a string key")?;
        let descriptor = to_descriptor(&spec["descriptor"])?;
        let value = to_amqp(&spec["value"])?;
        source = source.add_to_filter(key, Described { descriptor, value });
        keys.push(key.to_string());
    }

    let url = format!("amqp://{host_port}");
    let mut connection = Connection::open("fe2o3-amqp-interop", url.as_str())
        .await
        .map_err(|e| format!("open: {e:?}"))?;
    let mut session = Session::begin(&mut connection)
        .await
        .map_err(|e| format!("begin: {e:?}"))?;
    if send_first {
        send_shapes(&mut session, address).await?;
    }
    let attached = Receiver::builder()
        .name("fe2o3-filtered")
        .source(source.build())
        .attach(&mut session)
        .await;
    let result = match attached {
        Ok(mut receiver) => {
            let echoed = echoed(&receiver, &keys);
            let mut received = Vec::new();
            while received.len() < count {
                let delivery = receiver
                    .recv::<Body<Value>>()
                    .await
                    .map_err(|e| format!("receive after {received:?}: {e:?}"))?;
                receiver
                    .accept(&delivery)
                    .await
                    .map_err(|e| format!("accept: {e:?}"))?;
                let body = match delivery.body() {
                    Body::Value(value) => to_json(&value.0),
                    other => json!(format!("{other:?}")),
                };
                let properties = match &delivery.message().application_properties {
                    Some(props) => props
                        .0
                        .iter()
                        .map(|(k, v)| (k.clone(), simple_to_json(v)))
                        .collect(),
                    None => Map::new(),
                };
                received.push(json!({"body": body, "properties": properties}));
            }
            receiver
                .close()
                .await
                .map_err(|e| format!("close: {e:?}"))?;
            json!({"received": received, "echoed": echoed})
        }
        Err(error) => json!({"refused": refusal(&error)?}),
    };
    session.end().await.map_err(|e| format!("end: {e:?}"))?;
    connection
        .close()
        .await
        .map_err(|e| format!("close connection: {e:?}"))?;
    Ok(result)
}

/// The value of each requested filter in the broker's reply attach (null when not echoed).
fn echoed(receiver: &Receiver, keys: &[String]) -> Json {
    let filter = receiver.source().as_ref().and_then(|s| s.filter.as_ref());
    let mut map = Map::new();
    for key in keys {
        let symbol = Symbol::from(key.as_str());
        let value = filter.and_then(|f| f.get(&symbol));
        let value = match value {
            Some(Value::Described(described)) => to_json(&described.value),
            Some(other) => to_json(other),
            None => Json::Null,
        };
        map.insert(key.clone(), value);
    }
    Json::Object(map)
}

/// A refused attach is one the peer closed with an error; anything else is a failure.
fn refusal(error: &ReceiverAttachError) -> Result<Json, Failure> {
    let ReceiverAttachError::RemoteClosedWithError(remote) = error else {
        return Err(format!("attach failed without the peer's error: {error:?}"));
    };
    let definitions::Error {
        condition,
        description,
        info,
    } = remote;
    let info: Map<String, Json> = info
        .as_ref()
        .map(|fields| {
            fields
                .iter()
                .map(|(k, v)| (k.0.clone(), to_json(v)))
                .collect()
        })
        .unwrap_or_default();
    Ok(json!({
        "type": "ReceiverAttachError::RemoteClosedWithError",
        "message": error.to_string(),
        "condition": condition_symbol(condition)?,
        "description": description,
        "info": info,
    }))
}

/// The condition as it travelled: the symbol the crate encodes it as.
fn condition_symbol(condition: &definitions::ErrorCondition) -> Result<String, Failure> {
    let bytes = serde_amqp::to_vec(condition).map_err(|e| format!("condition: {e}"))?;
    match serde_amqp::from_slice::<Value>(&bytes) {
        Ok(Value::Symbol(symbol)) => Ok(symbol.0),
        other => Err(format!("condition encodes as {other:?}")),
    }
}

fn to_descriptor(descriptor: &Json) -> Result<Descriptor, Failure> {
    match descriptor {
        Json::String(name) => Ok(Descriptor::Name(name.as_str().into())),
        Json::Number(code) => Ok(Descriptor::Code(
            code.as_u64().ok_or("a descriptor code is a ulong")?,
        )),
        other => Err(format!("descriptor {other}: neither a symbol nor a code")),
    }
}

fn to_amqp(value: &Json) -> Result<Value, Failure> {
    if let Some(Json::Array(pair)) = value.get("described") {
        if let [descriptor, inner] = pair.as_slice() {
            let descriptor = to_descriptor(descriptor)?;
            return Ok(Value::Described(Box::new(Described {
                descriptor,
                value: to_amqp(inner)?,
            })));
        }
    }
    Ok(match value {
        Json::Null => Value::Null,
        Json::Bool(b) => Value::Bool(*b),
        Json::String(s) => Value::String(s.clone()),
        Json::Number(n) => match n.as_i64() {
            Some(i) => Value::Long(i),
            None => Value::Double(n.as_f64().ok_or("a number out of range")?.into()),
        },
        Json::Object(entries) => {
            let mut map = OrderedMap::new();
            for (k, v) in entries {
                map.insert(Value::String(k.clone()), to_amqp(v)?);
            }
            Value::Map(map)
        }
        Json::Array(items) => Value::List(items.iter().map(to_amqp).collect::<Result<_, _>>()?),
    })
}

fn to_json(value: &Value) -> Json {
    match value {
        Value::Null => Json::Null,
        Value::Bool(b) => json!(b),
        Value::Ubyte(n) => json!(n),
        Value::Ushort(n) => json!(n),
        Value::Uint(n) => json!(n),
        Value::Ulong(n) => json!(n),
        Value::Byte(n) => json!(n),
        Value::Short(n) => json!(n),
        Value::Int(n) => json!(n),
        Value::Long(n) => json!(n),
        Value::Float(n) => json!(n.0),
        Value::Double(n) => json!(n.0),
        Value::String(s) => json!(s),
        Value::Symbol(s) => json!(s.0),
        Value::List(items) => Json::Array(items.iter().map(to_json).collect()),
        Value::Described(described) => {
            let descriptor = match &described.descriptor {
                Descriptor::Name(name) => json!(name.0),
                Descriptor::Code(code) => json!(code),
            };
            json!({"described": [descriptor, to_json(&described.value)]})
        }
        Value::Map(entries) => Json::Object(
            entries
                .iter()
                .map(|(k, v)| {
                    (
                        to_json(k)
                            .as_str()
                            .map_or_else(|| format!("{k:?}"), String::from),
                        to_json(v),
                    )
                })
                .collect(),
        ),
        other => json!(format!("{other:?}")),
    }
}

fn simple_to_json(value: &SimpleValue) -> Json {
    to_json(&Value::from(value.clone()))
}
