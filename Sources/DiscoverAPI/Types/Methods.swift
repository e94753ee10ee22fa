/// Every method of docs/API.md with its parameter and reply types, so clients and the daemon agree at compile time.
///
/// Each interface's methods are declared next to their parameter and reply types (`ResolverTypes.swift`,
/// `DiscoveryTypes.swift`, `DaemonTypes.swift`); the varlink service interface's are here.
public enum Methods {
    // org.varlink.service
    public static let getInfo = VarlinkMethod<VarlinkEmpty, ServiceInfo>("org.varlink.service.GetInfo")
    public static let getInterfaceDescription = VarlinkMethod<InterfaceDescriptionParameters, InterfaceDescriptionReply>(
        "org.varlink.service.GetInterfaceDescription")
}
