// A Qpid Proton C++ receiver that attaches with a filter, used by
// tests/interop/test_interop_proton_cpp.py against filtex-broker.
//
//   filtered_receive URL ADDRESS SQL COUNT BAD_SQL
//
// 1. Attaches to ADDRESS with {"cpp-sql": amqp:sql-filter SQL}, built with the
//    C++ encoder as a described value, and accepts COUNT messages.
// 2. Attaches with {"cpp-bad": amqp:sql-filter BAD_SQL} and records what the
//    C++ API reports: on_receiver_open (the reply attach's source) and
//    on_receiver_error (the detach's error condition).
// Prints one JSON object on stdout.
#include <proton/connection.hpp>
#include <proton/container.hpp>
#include <proton/delivery.hpp>
#include <proton/error_condition.hpp>
#include <proton/message.hpp>
#include <proton/messaging_handler.hpp>
#include <proton/receiver.hpp>
#include <proton/receiver_options.hpp>
#include <proton/source.hpp>
#include <proton/source_options.hpp>
#include <proton/codec/encoder.hpp>

#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

namespace {

proton::source_options sql_filter(const std::string &key, const std::string &sql) {
    proton::value described;
    proton::codec::encoder enc(described);
    enc << proton::codec::start::described() << proton::symbol("amqp:sql-filter") << sql
        << proton::codec::finish();
    proton::source::filter_map filters;
    filters.put(proton::symbol(key), described);
    proton::source_options opts;
    opts.filters(filters);
    return opts;
}

std::string json(const std::string &s) {
    std::ostringstream out;
    out << '"';
    for (unsigned char c : s) {
        if (c == '"' || c == '\\') out << '\\' << c;
        else if (c == '\n') out << "\\n";
        else if (c < 0x20) { char buf[8]; std::snprintf(buf, sizeof buf, "\\u%04x", c); out << buf; }
        else out << c;
    }
    out << '"';
    return out.str();
}

class filtered_receive : public proton::messaging_handler {
    std::string url_, address_, sql_, bad_sql_;
    size_t count_;
    std::vector<std::string> bodies_;
    bool attach_seen_ = false, source_empty_ = false, done_ = false;
    std::string error_name_, error_description_;

  public:
    filtered_receive(std::string url, std::string address, std::string sql, size_t count,
                     std::string bad_sql)
        : url_(url), address_(address), sql_(sql), bad_sql_(bad_sql), count_(count) {}

    bool done() const { return done_; }

    void on_container_start(proton::container &c) override {
        proton::connection conn = c.connect(url_);
        proton::source_options source = sql_filter("cpp-sql", sql_);
        conn.open_receiver(address_, proton::receiver_options().name("cpp-filtered").source(source));
    }

    void on_message(proton::delivery &d, proton::message &m) override {
        bodies_.push_back(proton::to_string(m.body()));
        if (bodies_.size() == count_) {
            d.receiver().close();
            proton::source_options source = sql_filter("cpp-bad", bad_sql_);
            d.connection().open_receiver(address_,
                                         proton::receiver_options().name("cpp-refused").source(source));
        }
    }

    void on_receiver_open(proton::receiver &r) override {
        if (r.name() == "cpp-refused") {
            attach_seen_ = true;
            source_empty_ = r.source().address().empty() && r.source().filters().empty();
        }
    }

    void on_receiver_error(proton::receiver &r) override {
        if (r.name() != "cpp-refused") {
            std::cerr << "unexpected error on " << r.name() << ": " << r.error().what() << std::endl;
            r.connection().close();
            return;
        }
        error_name_ = r.error().name();
        error_description_ = r.error().description();
        done_ = true;
        r.connection().close();
    }

    void print() const {
        std::cout << "{\"bodies\": [";
        for (size_t i = 0; i < bodies_.size(); ++i) std::cout << (i ? ", " : "") << json(bodies_[i]);
        std::cout << "], \"refusal\": {\"attach_seen\": " << (attach_seen_ ? "true" : "false")
                  << ", \"source_empty\": " << (source_empty_ ? "true" : "false")
                  << ", \"condition\": " << json(error_name_)
                  << ", \"description\": " << json(error_description_) << "}}" << std::endl;
    }
};

}  // namespace

int main(int argc, char **argv) {
    if (argc != 6) {
        std::cerr << "usage: " << argv[0] << " URL ADDRESS SQL COUNT BAD_SQL" << std::endl;
        return 2;
    }
    try {
        filtered_receive app(argv[1], argv[2], argv[3], std::stoul(argv[4]), argv[5]);
        proton::container(app).run();
        if (!app.done()) {
            std::cerr << "the refusal was never seen" << std::endl;
            return 1;
        }
        app.print();
        return 0;
    } catch (const std::exception &e) {
        std::cerr << e.what() << std::endl;
    }
    return 1;
}
