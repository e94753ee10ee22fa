print("discoverd")
