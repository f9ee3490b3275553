/// A failed libgpiod call: the errno it left (both libgpiod adapters, 1.6 and 2.x, throw these).
struct CError: Error {
    var errno: Int32
}

/// A refused line request: the errno, and who held the line (kernel consumer label) when there was one.
struct RequestFailure: Error {
    var errno: Int32
    var holder: String?
}
