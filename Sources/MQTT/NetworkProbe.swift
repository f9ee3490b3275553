import SystemIO
import Glibc
import ParkWiseLog

/// A resolved address of a broker.
struct Address: Sendable {
    var family: Int32
    var bytes: [UInt8]   // the sockaddr
    var text: String
}

/// Name resolution and a TCP connect, each within a deadline, for `BrokerProbe`.
enum NetworkProbe {
    /// getaddrinfo on its own thread: a resolver that does not answer cannot hold the caller past `timeout`.
    static func resolve(host: String, port: Int, timeout: Double) -> Result<[Address], ProbeStep> {
        let result = Shared<Result<[Address], ProbeStep>?>(nil)
        let thread = DedicatedThread {
            var hints = addrinfo()
            hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
            var list: UnsafeMutablePointer<addrinfo>?
            let rc = getaddrinfo(host, String(port), &hints, &list)
            guard rc == 0 else {
                let reason = String(cString: gai_strerror(rc))
                result.withLock { $0 = .failure(ProbeStep(.failed, "\(host) resolves", detail: reason,
                                                           fix: "check the host name in mqtt.brokers, the DNS servers (/etc/resolv.conf, "
                                                             + "resolvectl status) and the network; or write the broker's IP address")) }
                return
            }
            defer { freeaddrinfo(list) }
            var found: [Address] = []
            var next = list
            while let entry = next?.pointee {
                if let addr = entry.ai_addr {
                    let bytes = Array(UnsafeRawBufferPointer(start: addr, count: Int(entry.ai_addrlen)))
                    var name = [CChar](repeating: 0, count: Int(NI_MAXHOST))
                    getnameinfo(addr, entry.ai_addrlen, &name, socklen_t(name.count), nil, 0, NI_NUMERICHOST)
                    let text = String(decoding: name.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
                    if !found.contains(where: { $0.text == text }) {
                        found.append(Address(family: entry.ai_family, bytes: bytes, text: text))
                    }
                }
                next = entry.ai_next
            }
            result.withLock { $0 = .success(found) }
        }
        guard thread.join(within: timeout) else {
            return .failure(ProbeStep(.failed, "\(host) resolves", detail: "no answer from the resolver within \(BrokerProbe.seconds(timeout))",
                                      fix: "check the DNS servers (/etc/resolv.conf, resolvectl status) and the network; "
                                        + "or write the broker's IP address in mqtt.brokers"))
        }
        return result.withLock { $0 } ?? .failure(ProbeStep(.failed, "\(host) resolves", detail: "no address"))
    }

    /// A non-blocking connect to each address in turn, `timeout` in all; the milliseconds it took.
    static func connect(_ addresses: [Address], port: Int, timeout: Double) -> Result<Int, ProbeStep> {
        open(addresses, port: port, timeout: timeout).map { connected in
            close(connected.fd)
            return connected.ms
        }
    }

    /// The connected (non-blocking) socket, which the caller closes, and the milliseconds the connect took.
    static func open(_ addresses: [Address], port: Int, timeout: Double) -> Result<(fd: Int32, ms: Int), ProbeStep> {
        let start = monotonicSeconds()
        var failures: [String] = []
        var refused = false
        for address in addresses {
            let left = timeout - (monotonicSeconds() - start)
            guard left > 0 else { break }
            let fd = socket(address.family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard fd >= 0 else { failures.append("\(address.text): \(Errno.current.text)"); continue }
            var rc = address.bytes.withUnsafeBytes {
                Glibc.connect(fd, $0.baseAddress!.assumingMemoryBound(to: sockaddr.self), socklen_t($0.count))
            }
            var code: Int32 = rc == 0 ? 0 : errno
            if code == EINPROGRESS {
                var pfd = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
                rc = retryingOnInterrupt { poll(&pfd, 1, Int32(max(0, timeout - (monotonicSeconds() - start)) * 1000)) }
                if rc == 0 {
                    code = ETIMEDOUT
                } else if rc < 0 {
                    code = errno   // not SO_ERROR, which reads 0 while the connect is still in progress
                } else {
                    var error: Int32 = 0
                    var length = socklen_t(MemoryLayout<Int32>.size)
                    getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length)
                    code = error
                }
            }
            if code == 0 { return .success((fd, Int((monotonicSeconds() - start) * 1000))) }
            close(fd)
            refused = refused || code == ECONNREFUSED
            failures.append("\(address.text): \(code == ETIMEDOUT ? "no answer within \(BrokerProbe.seconds(timeout))" : Errno(code).text)")
        }
        let fix = refused
            ? "nothing listens on port \(port) there: is the broker running (systemctl status mosquitto), with a listener on that port?"
            : "the packets are dropped or the host is down: check the address, the route (ip route), and firewalls between "
                + "the board and the broker (port \(port) must be open)"
        return .failure(ProbeStep(.failed, "TCP connect to port \(port)", detail: failures.joined(separator: "; "), fix: fix))
    }
}
