/// Every method of API.md with its parameter and reply types, so clients and the daemon agree at compile time.
public enum Methods {
    // org.varlink.service
    public static let getInfo = VarlinkMethod<VarlinkEmpty, ServiceInfo>("org.varlink.service.GetInfo")
    public static let getInterfaceDescription = VarlinkMethod<InterfaceDescriptionParameters, InterfaceDescriptionReply>(
        "org.varlink.service.GetInterfaceDescription")

    // io.discoverd.Resolver
    public static let resolveHTTPS = VarlinkMethod<ResolveHTTPSParameters, ResolveHTTPSReply>(
        "io.discoverd.Resolver.ResolveHTTPS")
    public static let resolveSVCB = VarlinkMethod<ResolveSVCBParameters, ResolveHTTPSReply>(
        "io.discoverd.Resolver.ResolveSVCB")
    public static let resolveAddresses = VarlinkMethod<ResolveAddressesParameters, ResolveAddressesReply>(
        "io.discoverd.Resolver.ResolveAddresses")
    public static let connectionPlan = VarlinkMethod<ConnectionPlanParameters, ConnectionPlanReply>(
        "io.discoverd.Resolver.ConnectionPlan")
    public static let reportAltSvc = VarlinkMethod<ReportAltSvcParameters, ReportAltSvcReply>(
        "io.discoverd.Resolver.ReportAltSvc")
    public static let flush = VarlinkMethod<FlushParameters, FlushReply>("io.discoverd.Resolver.Flush")

    // io.discoverd.Discovery
    public static let browse = VarlinkMethod<BrowseParameters, BrowseReply>("io.discoverd.Discovery.Browse")
    public static let resolveService = VarlinkMethod<ResolveServiceParameters, ResolveServiceReply>(
        "io.discoverd.Discovery.Resolve")
    public static let advertise = VarlinkMethod<AdvertiseParameters, AdvertiseReply>("io.discoverd.Discovery.Advertise")
    public static let updateAdvertisement = VarlinkMethod<UpdateAdvertisementParameters, VarlinkEmpty>(
        "io.discoverd.Discovery.UpdateAdvertisement")
    public static let withdraw = VarlinkMethod<WithdrawParameters, VarlinkEmpty>("io.discoverd.Discovery.Withdraw")
    public static let browseTypes = VarlinkMethod<BrowseTypesParameters, BrowseTypesReply>(
        "io.discoverd.Discovery.BrowseTypes")
    public static let browseDomains = VarlinkMethod<VarlinkEmpty, BrowseDomainsReply>(
        "io.discoverd.Discovery.BrowseDomains")

    // io.discoverd.Daemon
    public static let status = VarlinkMethod<StatusParameters, StatusReply>("io.discoverd.Daemon.Status")
    public static let reload = VarlinkMethod<VarlinkEmpty, VarlinkEmpty>("io.discoverd.Daemon.Reload")
}
