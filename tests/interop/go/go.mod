module filtex-interop/goamqp

go 1.19

require github.com/Azure/go-amqp v1.6.0
