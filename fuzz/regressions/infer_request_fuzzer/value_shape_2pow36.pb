
symbolic*
xFP32*
shapeINT64€€€€€